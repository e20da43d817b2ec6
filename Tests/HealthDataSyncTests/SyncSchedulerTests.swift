import HealthDataSync
import Testing

@Suite struct SyncSchedulerTests {
    let a = MeterID("C0:26:DA:01:02:03")
    let b = MeterID("C0:26:DA:01:02:04")

    @Test func automaticSyncIsSkippedWithinTheCooldownAndForcedOneRuns() {
        var s = SyncScheduler(cooldownSeconds: 30)
        let t0 = Instant(epochSeconds: 1_000)
        #expect(s.request(self.a, force: false, now: t0) == .start)
        s.finished(self.a, at: Instant(epochSeconds: 1_010))
        #expect(s.request(self.a, force: false, now: Instant(epochSeconds: 1_020)) == .skipCooldown(remainingMillis: 20_000))
        #expect(s.request(self.a, force: false, now: Instant(epochSeconds: 1_039)) == .skipCooldown(remainingMillis: 1_000))
        #expect(s.request(self.a, force: true, now: Instant(epochSeconds: 1_020)) == .start)
        s.finished(self.a, at: Instant(epochSeconds: 1_021))
        #expect(s.request(self.a, force: false, now: Instant(epochSeconds: 1_051)) == .start)
    }

    @Test func twoSyncsOfOneMeterNeverRunAtOnceButMetersAreIndependent() {
        var s = SyncScheduler(cooldownSeconds: 30)
        let t = Instant(epochSeconds: 5)
        #expect(s.request(self.a, force: false, now: t) == .start)
        #expect(s.request(self.a, force: true, now: t) == .alreadyRunning)
        #expect(s.request(self.b, force: false, now: t) == .start)
        #expect(s.isRunning(self.a) && s.isRunning(self.b))
        s.finished(self.b, at: t)
        #expect(s.isRunning(self.a) && !s.isRunning(self.b))
    }

    @Test func cooldownIsConfigurableAndSeededFromTheStore() {
        var s = SyncScheduler(cooldownSeconds: 0)
        s.finished(self.a, at: Instant(epochSeconds: 10))
        #expect(s.request(self.a, force: false, now: Instant(epochSeconds: 10)) == .start)
        var seeded = SyncScheduler(cooldownSeconds: 60)
        seeded.noteLastSync(self.b, at: Instant(epochSeconds: 100))
        #expect(seeded.request(self.b, force: false, now: Instant(epochSeconds: 130)) == .skipCooldown(remainingMillis: 30_000))
        seeded.forget(self.b)
        #expect(seeded.request(self.b, force: false, now: Instant(epochSeconds: 130)) == .start)
    }
}
