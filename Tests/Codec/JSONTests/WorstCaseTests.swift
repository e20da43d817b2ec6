import JSON
import Testing

/// The hostile 1 MiB request (issue #22): before, 130 000 keys in one object cost 30 s of CPU
/// (a linear key lookup per insert). The figures are in BENCHMARKS.md (`sugar-bench json`); these
/// tests check the behaviour through the production parser: the server's limits refuse it early,
/// and without the element bound it parses within a CPU budget the quadratic parser could not meet.
@Suite struct WorstCaseTests {
    static let message = JSONWorstCase.request()

    @Test func theMessageIsTheWorstCaseTheIssueDescribes() throws {
        #expect(Self.message.count <= 1 << 20 && Self.message.count > 1_000_000, "\(Self.message.count) bytes")
        var limits = JSONParseLimits()
        limits.maxElements = nil
        let value = try JSONValue(parsing: Self.message, limits: limits)
        let parameters = try #require(value["parameters"]?.objectValue)
        #expect(parameters.count == 130_000 + 3)
        #expect(parameters["a"] == 0 && parameters["999"] == nil && parameters["deep"]?.arrayValue?.count == 1)
        #expect(parameters["arrays"]?.arrayValue?.count == 1000)
    }

    @Test func theServersElementBoundRefusesItEarly() throws {
        let limits = JSONParseLimits(maxDepth: 64, maxElements: 4096, cpuBudget: .seconds(5))
        do {
            _ = try JSONValue(parsing: Self.message, limits: limits)
            Issue.record("the worst-case message was accepted")
        } catch {
            #expect(error.reason.contains("more than 4096 values and keys"), "\(error)")
            // 4 096 elements are about 2 048 keys of ≤ 8 bytes: refused in the first few KiB.
            #expect(error.offset < 32 << 10, "\(error)")
        }
    }

    /// 4 s of CPU is generous for one linear pass over 1 MiB even under a sanitizer; the quadratic
    /// parser needed 30 s, so it would have run out of budget here.
    @Test func withoutTheBoundItParsesWithinACPUBudget() throws {
        let limits = JSONParseLimits(maxDepth: 64, maxElements: nil, cpuBudget: .seconds(4))
        let value = try JSONValue(parsing: Self.message, limits: limits)
        #expect(value["parameters"]?.objectValue?.count == 130_003)
    }

    @Test func anExhaustedCPUBudgetStopsTheParse() {
        let limits = JSONParseLimits(maxDepth: 64, maxElements: nil, cpuBudget: .zero)
        #expect {
            _ = try JSONValue(parsing: Self.message, limits: limits)
        } throws: { error in
            (error as? JSONParseError)?.reason.contains("CPU budget") == true
        }
    }

    @Test func depthBoundStillApplies() {
        let deep = Array(repeating: UInt8(ascii: "["), count: 70) + Array(repeating: UInt8(ascii: "]"), count: 70)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: deep, limits: JSONParseLimits(maxDepth: 64)) }
    }

    @Test func duplicateKeysAreFoundAmongManyAndRemovalKeepsTheIndex() throws {
        var text = "{"
        for index in 0..<5000 { text += "\"k\(index)\":\(index)," }
        let duplicateOffset = text.utf8.count
        text += "\"k1234\":0}"
        do {
            _ = try JSONValue(parsing: text)
            Issue.record("a duplicate key was accepted")
        } catch {
            #expect(error.offset == duplicateOffset && error.reason.contains("k1234"), "\(error)")
        }
        var object: JSONObject = ["a": 1, "b": 2, "c": 3, "d": 4]
        object["b"] = nil
        #expect(object.keys == ["a", "c", "d"] && object["c"] == 3 && object["d"] == 4 && object["b"] == nil)
        object["b"] = 5
        object["a"] = .null
        #expect(object.keys == ["a", "c", "d", "b"] && object["b"] == 5 && object["a"] == .null)
        #expect(object == JSONObject([("a", .null), ("c", 3), ("d", 4), ("b", 5)]))
        #expect(object != JSONObject([("c", 3), ("a", .null), ("d", 4), ("b", 5)]))
    }
}
