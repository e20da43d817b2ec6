// sugard-forward: every reading sugard stores, to an MQTT 5 broker and Home Assistant. Parses the
// environment and runs SugarForward; everything worth testing lives there.
import Glibc
import SugarForward

var environment: [String: String] = [:]
var entry = environ
while let pointer = entry.pointee {
    let text = String(cString: pointer)
    if let eq = text.firstIndex(of: "=") {
        environment[String(text[..<eq])] = String(text[text.index(after: eq)...])
    }
    entry += 1
}
exit(await ForwardMain.run(arguments: Array(CommandLine.arguments.dropFirst()), environment: environment))
