import GlucoseProfile
import JSON
import SugarWire

/// `sugarctl decode CHARACTERISTIC HEX [--json]`: decodes one Glucose Profile packet offline.
enum DecodeCommand {
    static let help = CommandHelp(
        name: "decode",
        abstract: "Decode a Glucose Profile packet (offline, no daemon needed).",
        usage: "decode <characteristic> <hex> [--json] [--lenient-time]",
        arguments: [
            ("<characteristic>", "measurement, context, feature or racp (or 2a18, 2a34, 2a51, 2a52)."),
            ("<hex>", "The packet bytes in hex; spaces, colons and a 0x prefix are ignored."),
        ],
        options: [
            ("--json", "Print one JSON object instead of readable text."),
            ("--lenient-time", "Keep an out-of-range base time (e.g. month 13) instead of failing."),
        ],
        discussion: """
            Exit status: 0 decoded, 64 bad arguments, 65 malformed packet (one line on stderr naming the \
            field and byte offset; nothing on stdout).
            """
    )

    static let subcommand = Subcommand(help: help) { arguments in run(arguments) }

    enum Characteristic {
        case measurement, context, feature, racp

        init?(argument: String) {
            switch argument.lowercased() {
            case "measurement", "2a18", "0x2a18": self = .measurement
            case "context", "2a34", "0x2a34": self = .context
            case "feature", "2a51", "0x2a51": self = .feature
            case "racp", "2a52", "0x2a52": self = .racp
            default: return nil
            }
        }

        var title: String {
            switch self {
            case .measurement: "Glucose Measurement (0x2A18)"
            case .context: "Glucose Measurement Context (0x2A34)"
            case .feature: "Glucose Feature (0x2A51)"
            case .racp: "Record Access Control Point (0x2A52)"
            }
        }
    }

    static func run(_ arguments: [String]) -> Int32 {
        let parsed: ParsedArguments
        let characteristic: Characteristic
        let bytes: [UInt8]
        do throws(UsageError) {
            parsed = try ParsedArguments(arguments, flags: [JSONOutput.flag, "lenient-time"])
            if parsed.helpRequested {
                writeStdout(help.render())
                return ExitCode.success
            }
            guard parsed.positionals.count >= 1 else { throw UsageError(message: "Missing expected argument '<characteristic>'") }
            guard parsed.positionals.count >= 2 else { throw UsageError(message: "Missing expected argument '<hex>'") }
            guard let c = Characteristic(argument: parsed.positionals[0]) else {
                throw UsageError(
                    message: "Unknown characteristic '\(parsed.positionals[0])'; use measurement, context, feature or racp")
            }
            characteristic = c
            // Hex split over several arguments (`06 00 01 06` unquoted) is joined, as spaces are ignored.
            bytes = try parseHex(parsed.positionals[1...].joined(separator: " "))
        } catch {
            return usageFailure(error, help)
        }

        let options: GlucoseParsingOptions = parsed.flags.contains("lenient-time") ? [.lenientDateTime] : []
        let json: JSONValue
        do throws(GlucoseProfileError) {
            switch characteristic {
            case .measurement: json = try GlucoseMeasurement(bytes: bytes, options: options).json
            case .context: json = try MeasurementContext(bytes: bytes).json
            case .feature: json = try GlucoseFeature(bytes: bytes).json
            case .racp: json = try RACPMessage(bytes: bytes).json
            }
        } catch {
            writeStderr("error: \(error.description)\n")
            return ExitCode.dataError
        }

        if JSONOutput.wanted(parsed) {
            writeStdout(json.serialized() + "\n")
        } else {
            writeStdout(characteristic.title + "\n" + renderReadable(json))
        }
        return ExitCode.success
    }

    /// Hex digits to bytes. Spaces, tabs, colons, commas, dashes and `0x` before each group are ignored.
    static func parseHex(_ text: String) throws(UsageError) -> [UInt8] {
        var digits: [UInt8] = []
        for group in text.split(whereSeparator: { " \t\n:,-".contains($0) }) {
            var chars = Substring(group)
            if chars.hasPrefix("0x") || chars.hasPrefix("0X") { chars = chars.dropFirst(2) }
            for char in chars.utf8 {
                switch char {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digits.append(char - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digits.append(char - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digits.append(char - UInt8(ascii: "A") + 10)
                default:
                    throw UsageError(message: "Invalid hex '\(text)': unexpected character '\(Character(Unicode.Scalar(char)))'")
                }
            }
        }
        guard digits.count % 2 == 0 else {
            throw UsageError(message: "Invalid hex '\(text)': odd number of digits (\(digits.count))")
        }
        return stride(from: 0, to: digits.count, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
    }

    /// Readable text for a decoded packet: one `key: value` line per field, nested objects indented,
    /// `{code, name}` shown as `name (code)`, `{bits, names}` as `0x0040 (resultTooLow)`, null as `—`.
    static func renderReadable(_ value: JSONValue) -> String {
        guard case .object(let object) = value else { return scalarText(value, key: "") + "\n" }
        var out = ""
        renderObject(object, indent: 1, into: &out)
        return out
    }

    private static let hexKeys: Set<String> = ["flags", "reservedFlags", "extendedFlags", "raw", "bits"]

    private static func renderObject(_ object: JSONObject, indent: Int, into out: inout String) {
        let entries = object.entries.filter { $0.key != "characteristic" }
        let width = (entries.map(\.key.count).max() ?? 0) + 1
        let pad = String(repeating: "  ", count: indent)
        for entry in entries {
            let label = pad + entry.key + ":" + String(repeating: " ", count: width - entry.key.count)
            if case .object(let nested) = entry.value, compactText(nested) == nil {
                out += pad + entry.key + ":\n"
                renderObject(nested, indent: indent + 1, into: &out)
            } else {
                out += label + " " + scalarText(entry.value, key: entry.key) + "\n"
            }
        }
    }

    /// One-line text for `{code, name}` and `{bits, names}` objects, nil for others.
    private static func compactText(_ object: JSONObject) -> String? {
        if object.keys == ["code", "name"], let code = object["code"]?.intValue, let name = object["name"]?.stringValue {
            return "\(name) (\(code))"
        }
        if object.keys == ["bits", "names"], let bits = object["bits"]?.intValue, let names = object["names"]?.arrayValue {
            let list = names.compactMap(\.stringValue)
            return hex(bits, width: 4) + " (" + (list.isEmpty ? "none" : list.joined(separator: ", ")) + ")"
        }
        return nil
    }

    private static func scalarText(_ value: JSONValue, key: String) -> String {
        switch value {
        case .null: return "—"
        case .bool(let b): return b ? "yes" : "no"
        case .int(let i): return hexKeys.contains(key) ? "\(hex(i, width: key == "raw" || key == "bits" ? 4 : 2)) (\(i))" : String(i)
        case .double: return value.serialized()
        case .string(let s): return s
        case .array(let items): return items.map { scalarText($0, key: "") }.joined(separator: ", ")
        case .object(let object): return compactText(object) ?? value.serialized()
        }
    }

    private static func hex(_ value: Int64, width: Int) -> String {
        let digits = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
