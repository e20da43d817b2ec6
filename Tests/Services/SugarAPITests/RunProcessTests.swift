import Testing

/// The helper that runs socat and sugarctl for the socket tests.
@Suite struct RunProcessTests {
    @Test func aChildThatExitsWithoutReadingItsInputDoesNotKillTheTests() async throws {
        // 1 MiB does not fit the pipe: the write waits until /bin/true exits, then gets EPIPE. Before
        // runProcess blocked SIGPIPE on its writing thread, that SIGPIPE ended the whole test process
        // (seen in a CI run when socat was refused by the socket's mode and exited at once).
        let output = try await runProcess("/bin/true", [], stdin: String(repeating: "x", count: 1 << 20))
        #expect(output.status == 0)
    }
}
