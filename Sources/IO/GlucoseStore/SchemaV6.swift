import HealthDataSync

extension Schema {
    /// Version 6: how each meter is downloaded and whether its clock can be set, and the clock a
    /// sync set. Self-contained: it needs only the v1 tables (`meter`, `sync_session`), so it can be
    /// renumbered.
    ///
    /// - `meter.procedure`: `gls` or `verio` (NULL until a sync connected). `meter.clock_settable`:
    ///   1 when the meter offers Current Time with write or the i-SENS time characteristic. A meter
    ///   with stored readings before this step was downloaded over the Glucose Profile (earlier versions
    ///   refused Verio meters): it gets `gls`.
    /// - `sync_session.clock_set_*`: the meter clock the attempt set after its download (NULL: not
    ///   set): how (`currentTime`/`isens`), when, the local time written, and the skew (meter − host,
    ///   seconds) before (NULL: unset or unreadable) and after (NULL: not read back).
    static let v6 = """
        ALTER TABLE meter ADD COLUMN procedure TEXT CHECK (procedure IS NULL OR procedure IN ('gls', 'verio'));
        ALTER TABLE meter ADD COLUMN clock_settable INTEGER CHECK (clock_settable IS NULL OR clock_settable IN (0, 1));
        ALTER TABLE sync_session ADD COLUMN clock_set_method TEXT;
        ALTER TABLE sync_session ADD COLUMN clock_set_ms INTEGER;
        ALTER TABLE sync_session ADD COLUMN clock_set_local TEXT;
        ALTER TABLE sync_session ADD COLUMN clock_skew_before_s INTEGER;
        ALTER TABLE sync_session ADD COLUMN clock_skew_after_s INTEGER;
        UPDATE meter SET procedure = 'gls' WHERE EXISTS (SELECT 1 FROM reading WHERE reading.meter_id = meter.id);
        """
}
