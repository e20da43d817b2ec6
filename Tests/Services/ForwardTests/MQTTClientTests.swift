import Glibc
import Locking
import MQTT
import Testing

/// The MQTT client against a real mosquitto: publishes handed over far beyond its in-flight window
/// all go out from its own thread as PUBACKs come in, in order, each acknowledged once. (The bound
/// itself shows in ForwardTests' crash-duplicate count.)
@Suite(.serialized) struct MQTTClientTests {
    @Test func theWindowSendsEveryPublishInOrderAndReportsEveryAcknowledgement() async throws {
        let rig = try ForwardRig()
        var failed = true
        defer { rig.cleanUp(keep: failed) }
        try await rig.startBroker()
        let count = 600

        let received = Lock<[String]>([])
        var subscriberOptions = MQTTOptions(host: "127.0.0.1", port: Int32(rig.port), clientID: "window-subscriber")
        subscriberOptions.subscriptions = ["window/test"]
        let subscribed = Lock(false)
        let subscriber = MQTTClient(options: subscriberOptions) { event in
            switch event {
            case .connected: subscribed.withLock { $0 = true }
            case .message(_, let payload): received.withLock { $0.append(String(decoding: payload, as: UTF8.self)) }
            default: break
            }
        }
        try subscriber.start()
        defer { subscriber.stop() }
        #expect(await eventually(within: 10) { subscribed.withLock { $0 } })
        try await Task.sleep(for: .milliseconds(300))  // SUBACK

        let session = Lock<Int?>(nil)
        let acknowledged = Lock<[Int64]>([])
        var options = MQTTOptions(host: "127.0.0.1", port: Int32(rig.port), clientID: "window-publisher")
        options.maxInFlight = 4
        let client = MQTTClient(options: options) { event in
            switch event {
            case .connected(let s): session.withLock { $0 = s }
            case .acknowledged(let tokens, _):
                acknowledged.withLock { $0 += tokens }
            default: break
            }
        }
        try client.start()
        defer { client.stop() }
        #expect(await eventually(within: 10) { session.withLock { $0 } != nil })
        let s = try #require(session.withLock { $0 })
        // All handed over at once: far more than the window (and the broker's receive maximum).
        for i in 0..<count {
            client.publish(MQTTMessage(topic: "window/test", payload: Array("\(i)".utf8)), token: Int64(i), session: s)
        }
        // A publish without a token (as the status message) waits its turn but takes no room.
        client.publish(MQTTMessage(topic: "window/test", payload: Array("last".utf8)), session: s)

        #expect(await eventually(within: 20) { acknowledged.withLock { $0.count } >= count })
        #expect(acknowledged.withLock { $0 }.sorted() == (0..<Int64(count)).map { $0 })
        #expect(Set(acknowledged.withLock { $0 }).count == count, "an acknowledgement was reported twice")
        #expect(await eventually(within: 10) { received.withLock { $0.count } >= count + 1 })
        #expect(received.withLock { $0 } == (0..<count).map { "\($0)" } + ["last"], "not every message, or not in order")
        // A publish for a connection that is gone is dropped, not sent on the next one.
        client.publish(MQTTMessage(topic: "window/test", payload: Array("stale".utf8)), token: 9999, session: s + 1)
        try await Task.sleep(for: .milliseconds(300))
        #expect(!received.withLock { $0 }.contains("stale"))
        failed = false
    }

    /// A message `receive` did not finish is not acknowledged: it comes again. libmosquitto 2.0.11
    /// queues the PUBACK of a QoS 1 message BEFORE it calls the message callback (lib/handle_publish.c);
    /// unless the client holds its writes back until `receive` returned, a receiver that fails or
    /// is killed inside `receive` (a hub mid-commit) loses the message. Here the first delivery of
    /// "m2" is refused: the broker must send it again to the persistent session.
    @Test func aMessageNotReceivedIsSentAgain() async throws {
        let rig = try ForwardRig()
        var failed = true
        defer { rig.cleanUp(keep: failed) }
        try await rig.startBroker()
        let seen = Lock<[String]>([])
        let refused = Lock(false)
        let connects = Lock(0)
        var options = MQTTOptions(host: "127.0.0.1", port: Int32(rig.port), clientID: "receive-once")
        options.subscriptions = ["again/test"]
        options.cleanStart = false
        options.sessionExpirySeconds = 600
        options.retryMinimum = 0.1
        options.receive = { _, payload, _ in
            let text = String(decoding: payload, as: UTF8.self)
            seen.withLock { $0.append(text) }
            if text == "m2", !refused.withLock({ r in defer { r = true }; return r }) { return false }
            return true
        }
        let subscriber = MQTTClient(options: options) { event in
            if case .connected = event { connects.withLock { $0 += 1 } }
        }
        try subscriber.start()
        defer { subscriber.stop() }
        #expect(await eventually(within: 10) { connects.withLock { $0 } >= 1 })
        try await Task.sleep(for: .milliseconds(300))  // SUBACK

        let session = Lock<Int?>(nil)
        let publisher = MQTTClient(options: MQTTOptions(host: "127.0.0.1", port: Int32(rig.port), clientID: "again-publisher")) { event in
            if case .connected(let s) = event { session.withLock { $0 = s } }
        }
        try publisher.start()
        defer { publisher.stop() }
        #expect(await eventually(within: 10) { session.withLock { $0 } != nil })
        let s = try #require(session.withLock { $0 })
        for i in 1...4 { publisher.publish(MQTTMessage(topic: "again/test", payload: Array("m\(i)".utf8)), token: Int64(i), session: s) }

        #expect(await eventually(within: 20) { seen.withLock { $0.filter { $0 == "m2" }.count } >= 2 }, "m2 was not sent again: \(seen.withLock { $0 })")
        #expect(await eventually(within: 10) { Set(seen.withLock { $0 }) == ["m1", "m2", "m3", "m4"] })
        #expect(connects.withLock { $0 } >= 2, "the refusal did not end the connection")
        failed = false
    }

    /// Waiting between connect attempts sleeps in poll for the whole delay, also for delays under a
    /// second: a broker that is down costs no CPU between attempts (never a tight loop). Nothing
    /// listens on the rig's port here.
    @Test func waitingToRetryTakesNoCPU() async throws {
        let rig = try ForwardRig()
        defer { rig.cleanUp(keep: false) }
        let attempts = Lock(0)
        var options = MQTTOptions(host: "127.0.0.1", port: Int32(rig.port), clientID: "retry-cpu")
        options.retryMinimum = 0.3
        options.retryMaximum = 0.3
        let client = MQTTClient(options: options) { event in
            if case .disconnected = event { attempts.withLock { $0 += 1 } }
        }
        func cpuSeconds() -> Double {
            var spec = timespec()
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &spec)
            return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
        }
        let before = cpuSeconds()
        try client.start()
        try await Task.sleep(for: .seconds(2))
        let used = cpuSeconds() - before
        client.stop()
        let tried = attempts.withLock { $0 }
        #expect((3...10).contains(tried), "\(tried) connect attempts in 2 s with a 0.3 s delay")
        #expect(used < 0.5, "the client used \(used) s of CPU in 2 s of refused connects")
    }
}
