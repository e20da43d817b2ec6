import Glibc
import SystemIO

extension DoctorCommand {
    /// One line per file that holds or names a secret: sugard.conf and forward.conf (or
    /// `SUGARD_CONFIG` / `SUGARD_FORWARD_CONFIG`) and each `*_password_file`, `*_secret_file`,
    /// `*_token_file` they name. The rule is the programs' own (``SecretFiles``): a file others may
    /// read fails, as the service refuses to start with it (exit 78).
    static func secretChecks(environment: [String: String]) -> [Check] {
        var checks: [Check] = []
        for (path, group) in DefaultPaths.secretBearingConfigFiles(environment: environment) {
            var info = stat()
            guard stat(path, &info) == 0 else { continue }
            let service = group == DefaultPaths.forwardSecretGroup ? "sugard-forward" : "sugard"
            let text: String
            do throws(FileReadError) {
                text = String(decoding: try readWholeFile(path, limit: 1 << 20), as: UTF8.self)
            } catch {
                // Unreadable to us: fine when others cannot read it either; root sees what it names.
                let mode = UInt32(info.st_mode) & 0o7777
                let readable = mode & 0o004 != 0
                checks.append(
                    Check(
                        name: "secrets", status: readable ? .warning : .ok,
                        message: "\(path): cannot read it (\(error)); mode \(String(mode, radix: 8)), "
                            + (readable ? "readable by others" : "not readable by others"),
                        fix: "sudo sugarctl doctor (to check the secret files it names)", needsRoot: true))
                continue
            }
            let findings = SecretFiles.findings(configFile: path, text: text, serviceGroup: group)
            if !findings.contains(where: { $0.path == path }),
                let own = SecretFiles.examine(path, holds: "no secret inline", serviceGroup: group)
            {
                checks.append(self.secretCheck(own, service: service, holdsSecret: false))
            }
            checks += findings.map { self.secretCheck($0, service: service, holdsSecret: true) }
        }
        return checks
    }

    static func secretCheck(_ finding: SecretFiles.Finding, service: String, holdsSecret: Bool) -> Check {
        let subject = "\(finding.path) (\(finding.holds))"
        guard holdsSecret, finding.readableByOthers else {
            return Check(
                name: "secrets", status: .ok,
                message: "\(subject): mode \(finding.modeText) \(finding.owner):\(finding.group)"
                    + (holdsSecret ? ", not readable by others" : ""))
        }
        return Check(
            name: "secrets", status: .fail, message: "\(finding.path): \(finding.problem); \(service) refuses to start",
            fix: finding.fix, needsRoot: true)
    }
}
