// sugard-forward: every reading sugard stores, to an MQTT 5 broker and Home Assistant. Parses the
// environment and runs SugarForward; everything worth testing lives there.
import Glibc
import SugarForward
import SystemIO

let environment = processEnvironment()
exit(await ForwardMain.run(arguments: Array(CommandLine.arguments.dropFirst()), environment: environment))
