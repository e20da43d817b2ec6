import ProcessKit
import SystemIO

/// sugard(8) and sugard.conf(5), generated from ``DaemonCommandLine/options`` and
/// ``DaemonConfig/keys`` (the tables behind `sugard --help`): `sugard --generate-man sugard|sugard.conf`.
public enum ManPages {
    public static let names = ["sugard", "sugard.conf"]

    public static func page(_ name: String) -> String? {
        switch name {
        case "sugard": daemon()
        case "sugard.conf": configuration()
        default: nil
        }
    }

    static func daemon() -> String {
        var page = ManPage(name: "sugard", section: 8, summary: "Bluetooth LE blood-glucose meter gateway")
        page.section("Synopsis")
        page.literal(["sugard [OPTIONS]"])
        page.section("Description")
        page.paragraph(DaemonCommandLine.overview.split(separator: "\n").joined(separator: " "))
        page.paragraph("It normally runs as the systemd service sugard.service; sugarctl(1) talks to it. The configuration is described in sugard.conf(5).")
        page.section("Options")
        for option in DaemonCommandLine.options {
            page.item(option.flag + (option.argument.map { " " + $0 } ?? ""), option.help)
        }
        page.section("Signals")
        page.paragraph(DaemonCommandLine.signals)
        page.section("Exit status")
        page.paragraph("0 after a clean stop; 64 for bad options; 78 for a bad configuration (the message names file and line) or a secret in it that other users may read (the message names the file and the chmod/chown that fixes it); 1 for other failures.")
        page.section("Files")
        page.item("/etc/sugard/sugard.conf", "The configuration file, see sugard.conf(5).")
        page.item("/etc/sugard/sugard.conf.d/*.conf", "Drop-ins, read after the main file in lexical order.")
        page.item(
            "/var/lib/sugard/sugard.sqlite",
            "The database of readings, with a random identity (databaseId) of its own. sugard checks every 2 s and before "
                + "every write that the path still names the file it has open; when it was deleted, renamed or replaced, "
                + "sugard continues in a new file at the path under a new identity and says so in its status and log.")
        page.item(
            "/var/lib/sugard/sugard.sqlite.running",
            "Exists while sugard runs (it holds sugard's process id) and is removed on a clean stop. Found at start (or a "
                + "non-empty write-ahead log), it means the last stop was not clean: sugard then runs PRAGMA quick_check in "
                + "the background after it is ready (also once a week), and shows the result in its status "
                + "(daemon.storage.check; damage as storage degraded, code corrupt). `sugarctl check` runs integrity_check on demand.")
        page.item(
            "/var/lib/sugard/sugard.sqlite.before-restore-TIME",
            "The database as it was before `sugarctl restore` replaced it (TIME in UTC, e.g. 20260331T061500Z).")
        page.item("/run/sugard/" + DefaultPaths.socketName, "The Varlink socket.")
        page.section("See also")
        page.paragraph("sugarctl(1), sugard.conf(5), systemd.exec(5)")
        return page.roff
    }

    static func configuration() -> String {
        var page = ManPage(name: "sugard.conf", section: 5, summary: "sugard configuration file")
        page.section("Synopsis")
        page.literal(["/etc/sugard/sugard.conf", "/etc/sugard/sugard.conf.d/*.conf"])
        page.section("Description")
        page.paragraph("""
            One key = value setting per line; lines starting with # or ; are comments; a value may be enclosed in \
            double quotes (a stray or unterminated quote is an error). A key may appear once per file (replay may \
            repeat). After the main file, the drop-ins in the directory of the same name plus .d (the *.conf files, \
            in lexical order) are read; a drop-in overrides what came before. Flags given to sugard(8) override both.
            """)
        page.paragraph("""
            Unknown keys, bad values, a missing group (socket_group, admin_group) and an unknown time zone stop the \
            daemon at start-up with exit status 78 and a message naming the file and line. systemctl reload sugard \
            (SIGHUP) re-reads the files; log_level applies at once, other changes need a restart.
            """)
        page.section("Keys")
        DaemonConfig.reference.manItems(into: &page, flags: true)
        page.section("See also")
        page.paragraph("sugard(8), sugarctl(1)")
        return page.roff
    }
}
