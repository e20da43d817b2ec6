import Foundation
import Glibc
import HealthDataSync
import JSON
import SugarAPI
import Testing
import Varlink

/// The reference Python `varlink` package as an independent client: it parses our interface
/// description, calls methods, follows a `more` call and raises on an error reply.
@Suite struct PythonClientTests {
    static let script = """
        import json, sys, varlink
        path = sys.argv[1]
        out = {}
        with varlink.Client(address="unix:" + path) as client:
            interface = client.get_interface("io.sugard.HealthDataSync")
            out["methods"] = sorted(k for k, v in interface.members.items() if isinstance(v, varlink.scanner._Method))
            with client.open("io.sugard.HealthDataSync", namespaced=False) as conn:
                status = conn.GetStatus()
                out["readingCount"] = status["state"]["readingCount"]
                out["meters"] = [m["id"] for m in status["state"]["meters"]]
                try:
                    conn.ListReadings("not a time", None, None, None, None)
                    out["error"] = None
                except varlink.VarlinkError as e:
                    out["error"] = e.error()
                    out["errorParameter"] = e.parameters()["parameter"]
            with client.open("io.sugard.HealthDataSync", namespaced=False) as conn:
                replies = []
                for reply in conn.Watch(["readingCount"], None, None, _more=True):
                    replies.append(reply)
                    if len(replies) == 1:
                        print("READY", flush=True)
                    else:
                        break
                out["watch"] = replies
        print(json.dumps(out), flush=True)
        """

    @Test func pythonVarlinkClientIntrospectsCallsWatchesAndSeesErrors() async throws {
        try await withAPIServer { f in
            let scriptPath = f.directory + "/client.py"
            try Self.script.write(toFile: scriptPath, atomically: true, encoding: .utf8)
            let result = Task { try await runProcess("/usr/bin/env", ["python3", scriptPath, f.path]) }
            // Once the snapshot is in, change the watched field until the script has its second reply.
            var n = 100
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline, !(f.clientWatchers == 0 && n > 100) {
                if f.clientWatchers > 0 {
                    n += 1
                    let value = n
                    f.models.viewModel.update { $0.readingCount = value }
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            let output = try await result.value
            #expect(output.status == 0, "\(output.stderr)")
            let lines = output.stdout.split(separator: "\n")
            #expect(lines.first == "READY")
            let json = try JSONValue(parsing: String(try #require(lines.last)))
            #expect(json["methods"] == [
                "AddPerson", "AssignMeter", "AttributeReadings", "Backup", "CheckStorage", "EditPerson", "FollowReadings", "Forget", "GetPeopleStatus",
                "GetPerson", "GetStatus", "ListAssignments", "ListMeters", "ListPeople", "ListReadings", "ListSyncSessions", "Pair",
                "RemovePerson", "Restore", "RestoreUpload", "ShareMeter", "SubmitPasskey", "Sync", "Watch",
            ])
            #expect(json["readingCount"] == 7)
            #expect(json["meters"] == [.string(meterA.id.rawValue), .string(meterB.id.rawValue)])
            #expect(json["error"] == "io.sugard.HealthDataSync.InvalidParameter")
            #expect(json["errorParameter"] == "since")
            let watch = try #require(json["watch"]?.arrayValue)
            #expect(watch.count == 2)
            #expect(watch[0]["snapshot"] == true)
            #expect(watch[0]["fields"]?["readingCount"] == 7)
            #expect(watch[1]["snapshot"] == false)
            #expect((watch[1]["fields"]?["readingCount"]?.intValue ?? 0) > 100)
        }
    }
}
