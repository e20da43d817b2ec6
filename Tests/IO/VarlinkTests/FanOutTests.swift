import Glibc
import JSON
import Locking
import Testing
import TestSupport
import Varlink

/// The interface of the fan-out tests: subscribers get the rounds `Round` fans out.
let fanOutDescription = """
    # An interface for the fan-out tests.
    interface org.example.fanout

    # Receives every round from now on; needs 'more'.
    method Subscribe(size: int) -> (blob: string)

    # Sends one blob of `size` bytes, encoded once, to every subscriber; says to how many.
    method Round(size: int, tag: int) -> (queued: int)

    # Whether the last round has left the server's queue.
    method Probe() -> (roundLeft: bool)

    """

/// Subscribers and the last round's hand-off, for the fan-out interface.
struct FanOutInterface: VarlinkInterfaceHandler {
    struct State {
        var subscribers: [VarlinkReplier] = []
        var handOff: VarlinkHandOff?
    }

    let definition = try! VarlinkInterfaceDefinition(description: fanOutDescription)
    let state = Lock(State())
    var methodsRequiringMore: Set<String> { ["Subscribe"] }

    func handle(_ call: VarlinkCall, replier: VarlinkReplier) async throws(VarlinkError) {
        switch call.methodName {
        case "Subscribe":
            replier.fitSendBuffer(toReplies: Int(call.parameters["size"]?.intValue ?? 0))
            self.state.withLock { $0.subscribers.append(replier) }
            await replier.waitClosed()
        case "Round":
            let size = Int(call.parameters["size"]?.intValue ?? 0)
            let tag = call.parameters["tag"]?.intValue ?? 0
            let reply = VarlinkSharedReply { JSONValue.object(["blob": .string("\(tag):" + String(repeating: "x", count: size))]).write(into: &$0) }
            let handOff = VarlinkHandOff()
            let subscribers = self.state.withLock { state in
                state.handOff = handOff
                return state.subscribers
            }
            let queued = VarlinkReplier.reply(shared: reply, on: subscribers, handOff: handOff)
            replier.reply(["queued": .int(Int64(queued.filter { $0 }.count))])
        case "Probe":
            replier.reply(["roundLeft": .bool(self.state.withLock { $0.handOff?.isComplete ?? true })])
        default:
            return
        }
    }
}

/// Issue 39: replies fanned out to many connections (a round of `Watch` replies) are written in
/// turns, and the server reads and answers calls between the turns: a call does not wait behind a
/// whole round. The hand-off says when a round has left the server's queue.
@Suite struct FanOutTests {
    @Test func callsAreAnsweredBetweenTheTurnsOfARound() async throws {
        let fanOut = FanOutInterface()
        try await withServer(also: [fanOut]) { path in
            let size = 60_000
            let subscribers = try (0..<200).map { _ in try RawConnection(path: path) }
            for raw in subscribers {
                await raw.send(#"{"method":"org.example.fanout.Subscribe","parameters":{"size":\#(size)},"more":true}"#)
            }
            #expect(await eventually { fanOut.state.withLock { $0.subscribers.count } == subscribers.count })
            let caller = try RawConnection(path: path)
            let prober = try RawConnection(path: path)
            // A round is ~12 MB of writes (about 180 turns of 64 KB): some probe sent while it is written is
            // answered before it has left the queue. Eventually-style: a few rounds on a busy machine.
            var answeredDuringARound = 0
            var rounds = 0
            while answeredDuringARound == 0 && rounds < 30 {
                rounds += 1
                let queued = try await caller.call(#"{"method":"org.example.fanout.Round","parameters":{"size":\#(size),"tag":\#(rounds)}}"#)
                #expect(queued.parameters?["queued"]?.intValue == Int64(subscribers.count))
                while true {
                    let probe = try await prober.call(#"{"method":"org.example.fanout.Probe"}"#)
                    guard let left = probe.parameters?["roundLeft"]?.boolValue else { throw TestError("bad probe reply \(probe)") }
                    if left { break }
                    answeredDuringARound += 1
                }
                // Every subscriber gets the whole round, once, in order.
                for raw in subscribers {
                    let message = try #require(try await raw.readMessage(timeout: .seconds(20)))
                    #expect(message["continues"] == true)
                    let blob = message.parameters?["blob"]?.stringValue ?? ""
                    #expect(blob.utf8.count == "\(rounds):".utf8.count + size && blob.hasPrefix("\(rounds):"))
                }
            }
            #expect(answeredDuringARound > 0, "no call was answered while \(rounds) rounds were written")
            for raw in subscribers { raw.close() }
        }
    }

    @Test func aHandOffWithNothingQueuedIsComplete() async {
        let handOff = VarlinkHandOff()
        #expect(handOff.isComplete)
        await handOff.wait()
    }
}
