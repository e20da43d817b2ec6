import BluetoothHost
import Glibc
import JSON
import PacketCapture

/// `sugarctl capture redact IN OUT` and `sugarctl capture record OUT`: captures safe to share.
enum CaptureShareCommand {
    static let redactHelp = CommandHelp(
        name: "capture redact",
        abstract: "Make a capture safe to share: only the meter's traffic, no keys, fake addresses.",
        usage: "capture redact <in> <out> [--meter <addr>] [--keep-addresses] [--json]",
        arguments: [
            ("<in>", "A btsnoop capture (Android btsnoop_hci.log, btmon -w, or raw HCI 1001)."),
            ("<out>", "The redacted capture to write (btsnoop, same format as <in>)."),
        ],
        options: [
            ("--meter <addr>", "Keep only this peer's connections (default: every glucose-meter connection)."),
            ("--keep-addresses", "Leave Bluetooth addresses as they are (keys are removed regardless)."),
            JSONOutput.help("the summary on standard output, {\"output\", \"frames\", \"framesRemoved\", \"connectionsKept\", \"connectionsRemoved\", \"keyPDUsRemoved\", \"keysZeroed\", \"addressesReplaced\"}"),
        ],
        discussion: """
            Keeps the LE connections of the meter (or of every peer with the Glucose service), with their \
            connection events, encryption events and data; removes every other device, advertising from \
            other devices, classic Bluetooth, management and log frames, and every HCI command or reply \
            not about the kept connections (the local name and address among them).

            Keys: SMP key distribution PDUs (LTK, EDIV/Rand, IRK, identity address, CSRK) are removed; \
            Pairing Confirm/Random, public keys and DHKey checks, the LTK in LE Enable Encryption and in \
            the LE Long Term Key Request Reply, EDIV/Rand in the LE Long Term Key Request, and the IRKs \
            in LE Add Device To Resolving List are replaced by zeros of the same length. Each removed \
            frame leaves a 2-byte placeholder with its timestamp, so frame numbers stay those of <in> \
            and `sugarctl capture inspect` prints the same sessions and records for both files.

            Addresses become 00:00:00:00:00:01, 00:00:00:00:00:02, … in order of appearance (the top two \
            bits are kept, so a random static address stays one), the same fake for the same address.

            Exit status: 0 written, 64 bad arguments, 65 unreadable or corrupt capture, or nothing to \
            keep (no glucose meter, or --meter never connected), 1 other failure (e.g. <out> not writable).
            """
    )

    static let recordHelp = CommandHelp(
        name: "capture record",
        abstract: "Record live Bluetooth traffic (btmon's view) into a btsnoop file.",
        usage: "capture record <out> [--meter <addr>] [--redact] [--json]",
        arguments: [("<out>", "The capture to write (btsnoop, Linux monitor format 2001, what btmon -w writes).")],
        options: [
            ("--meter <addr>", "Stop when this meter's connection ends (its sync is over); with --redact keep only it."),
            ("--redact", "Redact on the fly as `sugarctl capture redact` does (no key reaches the file)."),
            JSONOutput.help("the summary on standard output when it stops, {\"output\", \"frames\", \"ending\"}"),
        ],
        discussion: """
            Reads the kernel's HCI monitor channel (the one btmon uses) until Ctrl-C, or until the meter \
            given with --meter disconnects. Needs root or CAP_NET_RAW (`sudo sugarctl capture record …`). \
            Start it, then run `sugarctl sync METER`.

            With --redact and no --meter, the connections kept are those of peers that advertised the \
            Glucose service before connecting; a bonded meter that advertises without it needs --meter.

            Exit status: 0 recorded, 64 bad arguments, 69 no Bluetooth in the kernel, 77 not root and no \
            CAP_NET_RAW, 1 other failure.
            """
    )

    static func redact(_ arguments: [String]) -> Int32 {
        let parsed: ParsedArguments
        let meter: BluetoothAddress?
        do throws(UsageError) {
            parsed = try ParsedArguments(arguments, flags: ["keep-addresses", JSONOutput.flag], valueOptions: ["meter"])
            if parsed.helpRequested {
                writeStdout(redactHelp.render())
                return ExitCode.success
            }
            guard parsed.positionals.count >= 1 else { throw UsageError(message: "Missing expected argument '<in>'") }
            guard parsed.positionals.count >= 2 else { throw UsageError(message: "Missing expected argument '<out>'") }
            guard parsed.positionals.count == 2 else {
                throw UsageError(message: "Unexpected argument '\(parsed.positionals[2])'")
            }
            meter = try self.meterOption(parsed)
        } catch {
            return usageFailure(error, redactHelp)
        }
        let options = RedactionOptions(meter: meter, keepAddresses: parsed.flags.contains("keep-addresses"))
        let summary: RedactionSummary
        do throws(CaptureError) {
            summary = try CaptureRedaction.redact(input: parsed.positionals[0], output: parsed.positionals[1], options: options)
        } catch {
            let message = error.message.hasSuffix(".") ? String(error.message.dropLast()) : error.message
            writeStderr("error: \(message)\n")
            return error.code == .io && error.message.hasPrefix("Cannot create") ? ExitCode.failure : ExitCode.dataError
        }
        var text = "Wrote \(parsed.positionals[1]): \(summary.frames) frames, \(summary.connectionsKept) connection(s) kept"
        text += ", \(summary.connectionsRemoved) removed; \(summary.framesRemoved) frame(s) removed"
        text += ", \(summary.keyPDUsRemoved) key PDU(s) removed, \(summary.keysZeroed) key field(s) zeroed"
        text += options.keepAddresses ? "; addresses kept.\n" : ", \(summary.addressesReplaced) address(es) replaced.\n"
        if JSONOutput.wanted(parsed) {
            let object: JSONObject = [
                "output": .string(parsed.positionals[1]), "frames": .int(Int64(summary.frames)),
                "framesRemoved": .int(Int64(summary.framesRemoved)), "connectionsKept": .int(Int64(summary.connectionsKept)),
                "connectionsRemoved": .int(Int64(summary.connectionsRemoved)), "keyPDUsRemoved": .int(Int64(summary.keyPDUsRemoved)),
                "keysZeroed": .int(Int64(summary.keysZeroed)),
                "addressesReplaced": options.keepAddresses ? .null : .int(Int64(summary.addressesReplaced)),
            ]
            writeStdout(JSONValue.object(object).serialized() + "\n")
        } else {
            writeStderr(text)
        }
        return ExitCode.success
    }

    static func record(_ arguments: [String]) -> Int32 {
        let parsed: ParsedArguments
        let meter: BluetoothAddress?
        do throws(UsageError) {
            parsed = try ParsedArguments(arguments, flags: ["redact", JSONOutput.flag], valueOptions: ["meter"])
            if parsed.helpRequested {
                writeStdout(recordHelp.render())
                return ExitCode.success
            }
            guard parsed.positionals.count >= 1 else { throw UsageError(message: "Missing expected argument '<out>'") }
            guard parsed.positionals.count == 1 else {
                throw UsageError(message: "Unexpected argument '\(parsed.positionals[1])'")
            }
            meter = try self.meterOption(parsed)
        } catch {
            return usageFailure(error, recordHelp)
        }
        let fd: Int32
        do throws(BluetoothHostError) {
            fd = try BluetoothHost.openMonitor()
        } catch {
            if error.isMissingKernelSupport {
                writeStderr("""
                    error: this kernel has no Bluetooth support (\(error)); there is no traffic to record.
                    Use a kernel with Bluetooth (CONFIG_BT) and an adapter; `sugarctl doctor` checks the rest.

                    """)
                return ExitCode.unavailable
            }
            if error.isPermissionDenied {
                writeStderr("error: recording needs root or CAP_NET_RAW (\(error)); run `sudo sugarctl capture record …`.\n")
                return ExitCode.noPermission
            }
            writeStderr("error: \(error).\n")
            return ExitCode.failure
        }
        defer { close(fd) }
        let path = parsed.positionals[0]
        do {
            let stop = try BluetoothHost.stopOnSignals()
            let writer = try BTSnoopWriter(path: path, datalink: .monitor)
            let redactor =
                parsed.flags.contains("redact")
                ? CaptureRedactor(datalink: .monitor, options: RedactionOptions(meter: meter)) : nil
            writeStderr("Recording to \(path)\(redactor == nil ? "" : " (redacted)"); Ctrl-C stops"
                + (meter.map { ", or the end of \($0)'s connection" } ?? "") + ".\n")
            let result = try MonitorRecorder.run(fd: fd, stopFD: stop, writer: writer, redactor: redactor, meter: meter)
            try writer.close()
            let (why, ending) =
                switch result.ending {
                case .interrupted: ("interrupted", "interrupted")
                case .meterDisconnected: ("the meter disconnected", "meterDisconnected")
                case .endOfStream: ("the monitor channel closed", "endOfStream")
                }
            writeStderr("Stopped (\(why)): \(result.frames) frames in \(path).\n")
            if JSONOutput.wanted(parsed) {
                let object: JSONObject = ["output": .string(path), "frames": .int(Int64(result.frames)), "ending": .string(ending)]
                writeStdout(JSONValue.object(object).serialized() + "\n")
            }
            return ExitCode.success
        } catch {
            writeStderr("error: \(error)\n")
            return ExitCode.failure
        }
    }

    private static func meterOption(_ parsed: ParsedArguments) throws(UsageError) -> BluetoothAddress? {
        guard let text = parsed.values["meter"] else { return nil }
        do throws(CaptureError) {
            return try BluetoothAddress(parsing: text)
        } catch {
            throw UsageError(message: "Invalid --meter: \(error.message)")
        }
    }
}
