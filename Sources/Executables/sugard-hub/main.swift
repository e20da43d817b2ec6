// sugard-hub: the gateways' MQTT streams into PostgreSQL, the fleet page and its API. Parses the
// environment and runs SugarHub; everything worth testing lives there.
import Glibc
import SugarHub
import SystemIO

exit(await HubMain.run(arguments: Array(CommandLine.arguments.dropFirst()), environment: processEnvironment()))
