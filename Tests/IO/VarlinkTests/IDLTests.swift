import JSON
import Testing
import Varlink

@Suite struct IDLParserTests {
    @Test func parsesTheSampleInterface() throws {
        let definition = try VarlinkInterfaceDefinition(description: pingDescription)
        #expect(definition.name == "org.example.ping")
        #expect(definition.text == pingDescription)
        #expect(definition.methods.count == 9)
        #expect(definition.memberOrder.first == "Reading")
        let reading = try #require(definition.types["Reading"])
        #expect(reading == .structure([
            VarlinkField(name: "value", type: .float),
            VarlinkField(name: "unit", type: .enumeration(["mgdl", "mmol"])),
            VarlinkField(name: "note", type: .optional(.string)),
        ]))
        let store = try #require(definition.methods["Store"])
        #expect(store.input.map(\.name) == ["reading", "tags", "limits", "flag", "meta"])
        #expect(store.input.map(\.type) == [
            .named("Reading"), .array(.string), .map(.int), .optional(.bool), .optional(.object),
        ])
        #expect(store.output.map(\.name) == ["stored", "reading"])
        #expect(definition.errors["Failed"]?.map(\.name) == ["reason", "code"])
        #expect(definition.methods["WhoAmI"]?.input == [])
    }

    @Test func parsesTheServiceInterfaceAndNestedTypes() throws {
        let service = VarlinkServer.serviceInterface
        #expect(service.name == "org.varlink.service")
        #expect(Set(service.methods.keys) == ["GetInfo", "GetInterfaceDescription"])
        #expect(service.errors.count == 6)

        let text = """
            interface com.example.a-b.c9
            type T (a: [][string]?(x: int, y: ?[]T), e: (one, two_three), o: object)
            # comment between members
            method M(t: ?T) -> () # trailing comment
            method N() -> (m: [string](p, q))
            """
        let definition = try VarlinkInterfaceDefinition(description: text)
        #expect(definition.name == "com.example.a-b.c9")
        #expect(definition.types["T"] == .structure([
            VarlinkField(name: "a", type: .array(.map(.optional(.structure([
                VarlinkField(name: "x", type: .int),
                VarlinkField(name: "y", type: .optional(.array(.named("T")))),
            ]))))),
            VarlinkField(name: "e", type: .enumeration(["one", "two_three"])),
            VarlinkField(name: "o", type: .object),
        ]))
        #expect(definition.methods["N"]?.output == [VarlinkField(name: "m", type: .map(.enumeration(["p", "q"])))])
    }

    static let invalid: [(text: String, line: Int, column: Int, mentions: String)] = [
        ("", 1, 1, "expected 'interface'"),
        ("# only a comment\n", 2, 1, "expected 'interface'"),
        ("interface Org.Example", 1, 11, "not a valid interface name"),
        ("interface single", 1, 11, "not a valid interface name"),
        ("interface org.example\nmethod ping() -> ()", 2, 8, "not a valid method name"),
        ("interface org.example\n\nmethod Ping(a: int -> ()", 3, 20, "expected ',' or ')'"),
        ("interface org.example\nmethod Ping() (a: int)", 2, 15, "expected '->'"),
        ("interface org.example\ntype T (a: int)\ntype T (b: int)", 3, 6, "declared twice"),
        ("interface org.example\nmethod M(a: int, a: string) -> ()", 2, 18, "appears twice"),
        ("interface org.example\nmethod M(a: Missing) -> ()", 2, 13, "'Missing' is not declared"),
        ("interface org.example\nmethod M(a: ??int) -> ()", 2, 14, "'??'"),
        ("interface org.example\nmethod M(a: [int]string) -> ()", 2, 14, "map keys must be 'string'"),
        ("interface org.example\nmethod M(a: integer) -> ()", 2, 13, "'integer' is not a type"),
        ("interface org.example\nmethod M(one, two) -> ()", 2, 9, "found an enum"),
        ("interface org.example\nmethod M(a: int, b) -> ()", 2, 18, "expected ':'"),
        ("interface org.example\ntype E (a, b: int)", 2, 12, "enum values take no type"),
        ("interface org.example\ntype T int", 2, 8, "expected '('"),
        ("interface org.example\nerror E", 2, 8, "expected '('"),
        ("interface org.example\nfoo Bar()", 2, 1, "expected 'type', 'method' or 'error'"),
        ("interface org.example\nmethod M(_a: int) -> ()", 2, 10, "not a valid field name"),
        ("interface org.example\nmethod M(a__b: int) -> ()", 2, 10, "not a valid field name"),
        ("interface org.example\nmethod M(a: int,) -> ()", 2, 17, "expected a field name"),
    ]

    @Test(arguments: IDLParserTests.invalid.indices)
    func rejectsInvalidText(_ index: Int) {
        let sample = Self.invalid[index]
        do {
            _ = try VarlinkInterfaceDefinition(description: sample.text)
            Issue.record("accepted invalid text: \(sample.text)")
        } catch {
            #expect(error.line == sample.line, "\(error)")
            #expect(error.column == sample.column, "\(error)")
            #expect(error.reason.contains(sample.mentions), "\(error)")
            #expect(error.description.hasPrefix("interface description line \(sample.line), column \(sample.column): "))
        }
    }
}

@Suite struct ValidationTests {
    let definition = try! VarlinkInterfaceDefinition(description: pingDescription)

    var goodStore: JSONObject {
        [
            "reading": ["value": 5.5, "unit": "mmol", "note": nil],
            "tags": ["a", "b"],
            "limits": ["low": 4, "high": 10],
        ]
    }

    @Test func acceptsValidParameters() throws {
        try self.definition.validateCall(method: "Store", parameters: self.goodStore)
        var withOptionals = self.goodStore
        withOptionals["flag"] = true
        withOptionals["meta"] = ["anything": [1, "two"]]
        try self.definition.validateCall(method: "Store", parameters: withOptionals)
        try self.definition.validateCall(method: "WhoAmI", parameters: [:])
        // Integers are acceptable floats; integral floats are acceptable ints.
        try self.definition.validateCall(method: "Counter", parameters: ["count": 3.0])
        try self.definition.validateReply(method: "Store", parameters: ["stored": 2, "reading": ["value": 100, "unit": "mgdl"]])
        try self.definition.validateError(name: "org.example.ping.Failed", parameters: ["reason": "x"])
    }

    static let bad: [(change: @Sendable (inout JSONObject) -> Void, path: [String])] = [
        ({ $0["reading"] = nil }, ["reading"]),
        ({ $0["tags"] = .null }, ["tags"]),
        ({ $0["tags"] = "a" }, ["tags"]),
        ({ $0["tags"] = ["a", 1] }, ["tags", "[1]"]),
        ({ $0["tags"] = ["a", nil] }, ["tags", "[1]"]),
        ({ $0["limits"] = ["x": 1.5] }, ["limits", "x"]),
        ({ $0["flag"] = "yes" }, ["flag"]),
        ({ $0["meta"] = [1] }, ["meta"]),
        ({ $0["extra"] = 1 }, ["extra"]),
        ({ $0["reading"] = ["value": 1, "unit": "mg"] }, ["reading", "unit"]),
        ({ $0["reading"] = ["value": "1", "unit": "mgdl"] }, ["reading", "value"]),
        ({ $0["reading"] = ["unit": "mgdl"] }, ["reading", "value"]),
        ({ $0["reading"] = ["value": 1, "unit": "mgdl", "colour": "red"] }, ["reading", "colour"]),
    ]

    @Test(arguments: ValidationTests.bad.indices)
    func rejectsInvalidParameters(_ index: Int) {
        var parameters = self.goodStore
        Self.bad[index].change(&parameters)
        #expect(throws: VarlinkValidationError.self) {
            try self.definition.validateCall(method: "Store", parameters: parameters)
        }
        do {
            try self.definition.validateCall(method: "Store", parameters: parameters)
        } catch {
            #expect(error.path == Self.bad[index].path, "\(error)")
            #expect(error.parameter == Self.bad[index].path[0])
        }
    }

    @Test func rejectsInvalidReplies() {
        #expect(throws: VarlinkValidationError.self) {
            try self.definition.validateReply(method: "Ping", parameters: [:])
        }
        #expect(throws: VarlinkValidationError.self) {
            try self.definition.validateReply(method: "Ping", parameters: ["text": 1])
        }
        #expect(throws: VarlinkValidationError.self) {
            try self.definition.validateReply(method: "Nope", parameters: [:])
        }
        #expect(throws: VarlinkValidationError.self) {
            try self.definition.validateError(name: "org.example.ping.Unknown", parameters: [:])
        }
    }
}
