// Generated from io.sugard.HealthDataSync.varlink (a test asserts the two are byte-identical).
// After editing the .varlink file, paste its text here unchanged.

extension HealthDataSyncService {
    /// The `io.sugard.HealthDataSync` interface description, served verbatim by
    /// `org.varlink.service.GetInterfaceDescription`.
    public static let interfaceDescription = #"""
        # sugard: Bluetooth LE blood-glucose meters as a dependable data source.
        #
        # The daemon keeps one view model (its state) and per-meter models; this interface serves them,
        # the stored readings and the sync sessions, and lets privileged callers sync, pair and forget
        # meters.
        #
        # Conventions: every instant is an Instant (ISO 8601 in UTC plus epoch milliseconds); every
        # glucose value comes in mg/dL and mmol/L (mg/dL = mmol/L x 18.0156); enums are stable names.
        #
        # Access: read methods (GetStatus, Watch, ListReadings, ListMeters, ListSyncSessions,
        # FollowReadings, ListPeople, GetPerson, ListAssignments, GetPeopleStatus) are open to root, the
        # daemon's own user and members of the socket group. Mutating methods (Sync, Forget, Pair,
        # SubmitPasskey, AssignMeter, ShareMeter, AttributeReadings, AddPerson, EditPerson, RemovePerson,
        # Backup, RestoreUpload, Restore) are open to root, the daemon's own user and members of the admin
        # group.
        # Anyone else gets PermissionDenied.
        interface io.sugard.HealthDataSync

        # One reading of a batched FollowReadings reply and its place in the commit order.
        type FollowedReading (cursor: int, reading: object)

        # An instant: ISO 8601 in UTC ("2024-03-31T06:15:00Z") and milliseconds since 1970-01-01 UTC.
        type Instant (iso: string, epochMillis: int)

        # A glucose concentration in both units.
        type Glucose (mgdL: float, mmolL: float)

        # A spec-defined enum value: its stable name and its code in the Glucose Profile.
        type Coded (name: string, code: int)

        # Why storage does not work fully.
        type StoreFailure (code: string, message: string)

        # Whether the database works: ok, degraded (reads work, the last write failed, or the file was
        # replaced and recreated: error code replaced) or failed. databaseId is the open database's
        # identity: a random UUID made when it was created, kept by migrations and backups, new after a
        # restore or after the file was deleted or replaced under the daemon. check is the latest integrity
        # check since the daemon started (absent: none ran); damage it found makes status degraded with
        # error code corrupt.
        type Storage (
          status: (ok, degraded, failed),
          path: string,
          error: ?StoreFailure,
          databaseId: ?string,
          check: ?StorageCheck
        )

        # An integrity check of the database file, run beside the daemon's work (never before ready):
        # kind quick (PRAGMA quick_check) after an unclean shutdown and weekly (reason uncleanShutdown,
        # scheduled), full (PRAGMA integrity_check) on request (CheckStorage). problems holds the first 10
        # of the problemCount lines SQLite reported (damaged); message says why a failed check could not
        # run.
        type StorageCheck (
          kind: (quick, full),
          reason: (uncleanShutdown, scheduled, requested),
          result: (running, ok, damaged, failed),
          startedAt: Instant,
          finishedAt: ?Instant,
          problemCount: int,
          problems: []string,
          message: ?string
        )

        # The daemon itself. Uptime is now minus startedAt.
        type Daemon (version: string, startedAt: Instant, storage: Storage)

        # The Bluetooth adapter the daemon uses.
        type Adapter (present: bool, powered: bool, discovering: bool, name: ?string, address: ?string)

        # Who a meter is: its stable id (Bluetooth address) and what it says about itself.
        type MeterIdentity (
          id: string,
          name: ?string,
          manufacturer: ?string,
          model: ?string,
          serialNumber: ?string,
          firmware: ?string,
          displayName: string
        )

        # How a sync attempt ended (running: only while it runs).
        type SyncResult (success, noNewRecords, failed, interrupted, aborted, running)

        # Where a sync of one meter is. queued: waiting for one of the max_connections connection slots
        # (meters are served in the order they queued).
        type SyncPhase (
          idle,
          queued,
          connecting,
          pairing,
          readingDeviceInfo,
          readingClock,
          subscribing,
          counting,
          receiving,
          waitingToRetry,
          settingClock,
          committing,
          disconnecting,
          done,
          failed
        )

        # Whether the daemon holds a bond with a meter, and where pairing is.
        type PairingState (unknown, notPaired, pairing, waitingForPasskey, paired, failed)

        # Records received in the running attempt, and how many the meter announced.
        type Progress (received: int, expected: ?int)

        # The last finished sync attempt of a meter. reset: it found the meter reset (a new epoch).
        type LastSync (meter: string, at: Instant, result: SyncResult, stored: int, duplicates: int, reset: bool, clockSet: ?ClockSet)

        # An error as people see it: a stable code, one sentence and what to do about it.
        type ReportedError (code: string, message: string, hint: ?string, at: Instant, meter: ?string, specCode: ?int)

        # One meter as the daemon sees it now (the meter model's fields plus its id).
        type Meter (
          id: string,
          identity: MeterIdentity,
          link: (disconnected, connecting, connected, disconnecting),
          sync: SyncPhase,
          progress: Progress,
          lastSync: ?LastSync,
          highWater: ?int,
          pairing: PairingState,
          lastError: ?ReportedError,
          nextAttempt: ?Instant
        )

        # The newest stored reading, summarised. Age is now minus instant.
        type LastReading (
          meter: string,
          sequenceNumber: int,
          instant: Instant,
          glucose: ?Glucose,
          ketoneMmolL: ?float,
          flags: []string,
          sampleType: ?Coded,
          sampleLocation: ?Coded,
          meterLocalTime: string,
          utcOffsetSeconds: int,
          timeMethod: (meterClock, assumedClock, untrusted),
          storeID: ?int,
          storedAt: ?Instant
        )

        # The daemon-wide sync picture.
        type SyncOverview (phase: (idle, syncing), activeMeters: []string, lastResult: ?LastSync)

        # The view model: the daemon's single source of truth.
        type State (
          daemon: Daemon,
          adapter: Adapter,
          meters: []Meter,
          lastReading: ?LastReading,
          readingCount: int,
          sync: SyncOverview,
          errors: []ReportedError
        )

        # The display unit a client should use unless told otherwise.
        type Unit (mgdl, mmol)

        # What the database holds about a meter. person: who the meter is assigned to now (AssignMeter);
        # shared: the meter is shared now (ShareMeter).
        type StoredMeter (
          firstSeen: Instant,
          lastSeen: Instant,
          highWater: ?int,
          epoch: int,
          lastSync: ?Instant,
          lastSyncResult: ?SyncResult,
          readingCount: int,
          features: ?int,
          person: ?string,
          shared: ?bool
        )

        # A meter known to the daemon (live model), to the database, or to both; person is the person
        # the meter is assigned to (null when it is not).
        type MeterEntry (
          id: string,
          identity: MeterIdentity,
          live: ?Meter,
          stored: ?StoredMeter,
          person: ?string,
          procedure: ?(gls, verio),
          clockSettable: ?bool
        )

        # An identifier of a person in another system: system names the issuer (a URI, such as a
        # clinic's urn:oid:...), value the identifier within it.
        type PersonIdentifier (system: string, value: string)

        # A person. name is unique on this gateway and names the person everywhere (readings, sinks,
        # reports). low and high are the thresholds reports and alerts use (null: the defaults); unit is
        # the unit the person prefers (null: the configured one); meters are the meters assigned to the
        # person now; readingCount counts the readings that belong to the person.
        type Person (
          id: int,
          name: string,
          identifiers: []PersonIdentifier,
          low: ?Glucose,
          high: ?Glucose,
          unit: ?Unit,
          created: Instant,
          readingCount: int,
          meters: []string
        )

        # One period of a meter's assignment history: from (inclusive) until (exclusive; null while it
        # lasts). In a shared period person is null and the readings wait for an attribution.
        # readingCount counts the meter's readings measured in the period.
        type Assignment (meter: string, person: ?string, shared: bool, from: Instant, until: ?Instant, readingCount: int)

        # The meter clock a sync set after its download (method: Current Time 0x2A2B or the i-SENS
        # vendor time 0xFFF1). written is the local time written; the skews are meter minus host in
        # seconds, before (null: unset or unreadable) and after (null: not read back).
        type ClockSet (
          method: (currentTime, isens),
          at: Instant,
          written: string,
          skewBeforeSeconds: ?int,
          skewAfterSeconds: ?int
        )

        # One sync attempt as recorded.
        type Session (
          id: ?int,
          meter: string,
          started: Instant,
          ended: ?Instant,
          result: SyncResult,
          expected: ?int,
          received: int,
          stored: int,
          duplicates: int,
          error: ?string,
          reset: bool,
          sequenceResets: int,
          clockSet: ?ClockSet
        )

        # The whole view model at one revision. revisions holds each field's last-changed revision;
        # unit is the configured display unit; people maps each assigned meter's id to its person (from
        # the database, not part of the view model).
        method GetStatus() -> (revision: int, revisions: [string]int, state: State, unit: Unit, people: ?[string]string)

        # Watches the view model (or, with meter, that meter's model); needs 'more'. The first reply is
        # a snapshot of the watched fields, later replies carry only fields that changed. fields names
        # the fields to depend on (view model: daemon, adapter, meters, lastReading, readingCount, sync,
        # errors; meter model: identity, link, sync, progress, lastSync, highWater, pairing, lastError,
        # nextAttempt);
        # none means all. policy coalesced (default) delivers each changed field once with its latest
        # value; immediate delivers every change in order. fields in a reply has the shape of State
        # (or of Meter) restricted to the fields present. A watcher that falls too far behind ends with
        # SlowConsumer: call Watch again for a fresh snapshot. followSyncing watches a meter model that
        # follows whichever meter is syncing: it starts on meter (else a meter syncing now, else the first
        # known one) and rebinds on the same call each time another meter starts a sync; generation
        # advances with each rebind, the reply after it is a snapshot of the new meter, meter names the
        # meter each reply is about, and nothing the previous meter emits after the rebind arrives.
        method Watch(fields: ?[]string, policy: ?(coalesced, immediate), meter: ?string, followSyncing: ?bool) -> (
          generation: int,
          revision: int,
          snapshot: bool,
          fields: object,
          revisions: [string]int,
          meter: ?string
        )

        # Stored readings. person: only the readings that belong to that person (by the assignment that
        # covers their measured time, or by attribution); unattributed: only readings of shared periods
        # that nobody was given yet (each such reading has awaitingAttribution true).
        # since (inclusive) and until (exclusive) are ISO 8601 instants with a zone
        # ("2024-03-31T06:00:00Z", "2024-03-31T08:00:00+02:00") or a date ("2024-03-31", midnight UTC).
        # limit defaults to 1000 (at most 100000 without 'more'); order is asc (oldest first, default) or desc. Each
        # reading carries the keys of `sugarctl decode measurement --json` plus id, meter, epoch,
        # ketoneMmolL, flags, time {iso, epochMillis, local, utcOffsetMinutes, zone, method,
        # meterLocalTime, meterClockSkewSeconds, quirks}, storedAt, context (or null), person (the person
        # the reading belongs to, or null) and awaitingAttribution. With 'more'
        # the readings come in several replies; without it, at most 10000 may be returned at once.
        # With 'more' the daemon reads the readings page by page (a keyset on the measured instant and
        # the id), each page only once the client has read the replies before it, so any number of
        # readings costs it one page: limit then has no maximum, and all true (without limit) sends
        # every reading that matches. truncated (in the last reply) says the limit cut the list.
        # With compact true each reading carries only the keys of FollowReadings' compact form, with the
        # same values (what a report or a Nightscout export reads), made without decoding the stored
        # packets again.
        # With csv true each reply carries its readings as rows of `sugarctl readings --format csv` (RFC
        # 4180 with CRLF, no header row) in csv, how many in csvRows, and readings is empty: an export
        # the daemon writes without a JSON object per reading. compact and csv do not go together.
        method ListReadings(
          since: ?string,
          until: ?string,
          meter: ?string,
          limit: ?int,
          order: ?(asc, desc),
          person: ?string,
          unattributed: ?bool,
          all: ?bool,
          compact: ?bool,
          csv: ?bool
        ) -> (
          readings: []object,
          csv: ?string,
          csvRows: ?int,
          truncated: ?bool,
          unit: Unit
        )

        # Every stored reading after the cursor after (default 0: from the first), in commit order, one
        # per reply, then each new reading as it is committed; needs 'more' and never ends by itself.
        # Nothing is coalesced or skipped. reading has the shape of ListReadings' readings; cursor is
        # the reading's place in the commit order: call again with after set to the last cursor received
        # to resume right after it. A reading comes again, at a later cursor and with its new person,
        # each time its person changes (AttributeReadings, or AssignMeter/ShareMeter with a from in the
        # past); its id stays the same. The daemon reads the next readings from its database only as the
        # client reads the replies, so a slow client slows its own stream and nothing else; a client
        # that stops reading for a while (its own flow control) keeps its connection and gets the rest
        # once it reads again.
        # With batch (1 to 256), a reply carries up to batch readings when several are waiting: readings
        # holds them in commit order, each with its cursor, cursor is the last one's, and reading is
        # absent. Without batch, every reply has one reading and no readings.
        # With compact true, each reading carries only the keys sinks use, with the same values as in
        # the full shape: id, meter, epoch, sequenceNumber, mgdL, mmolL, flags, person, time (iso,
        # epochMillis, local, utcOffsetMinutes), type and sampleLocation (code, name; null without
        # the field) and context (meal with code and name; null when no context carried a meal).
        # Cursors are positions in one database: every reply carries databaseId, the identity of the
        # database its readings come from. Pass the databaseId the cursor after came with: when the
        # daemon's database is another one (recreated, restored), after is ignored and the stream starts
        # from the beginning of the current database. When the database changes during the stream, it
        # goes on from the beginning of the new one (replies then carry the new databaseId).
        method FollowReadings(after: ?int, databaseId: ?string, batch: ?int, compact: ?bool) -> (
          cursor: int,
          reading: ?object,
          readings: ?[]FollowedReading,
          databaseId: ?string
        )

        # Every meter the daemon or its database knows, sorted by id.
        method ListMeters() -> (meters: []MeterEntry)

        # Syncs one meter, or every known meter without meter. force skips the cooldown. Without 'more'
        # the reply comes when the sync ended, with the sessions. With 'more', progress replies (meter,
        # phase, received, expected) come first, then the final reply with the sessions. Admin only.
        method Sync(meter: ?string, force: ?bool) -> (
          meter: ?string,
          phase: ?SyncPhase,
          received: ?int,
          expected: ?int,
          sessions: ?[]Session
        )

        # Forgets a meter: it leaves the meter list and syncs from scratch when seen again. Its
        # readings are kept. Admin only.
        method Forget(meter: string) -> ()

        # Starts an assignment of a meter to a person (1 to 64 characters, no control characters) at
        # from (an instant as ListReadings takes it; default now) and ends the period that covered from;
        # with person null or absent, only ends that period (unassigns). A reading belongs to the person
        # whose period covers its measured time, so readings measured before from keep their person.
        # With from in the past, the readings measured from then until the next later period move:
        # moved counts those whose person changed, unchanged the others in that span. A person not yet
        # known is added (addedPerson). from may not be in the future. Admin only.
        method AssignMeter(meter: string, person: ?string, from: ?string) -> (moved: ?int, unchanged: ?int, addedPerson: ?bool)

        # Marks a meter shared from from (default now), ending the period that covered it: readings
        # measured from then on have no person until AttributeReadings gives them one. Admin only.
        method ShareMeter(meter: string, from: ?string) -> (moved: int, unchanged: int)

        # A meter's assignment periods, oldest first.
        method ListAssignments(meter: string) -> (assignments: []Assignment)

        # Gives readings measured while their meter was shared to person: the readings with these ids
        # (one given to someone else before moves: a correction), or the meter's readings measured in
        # [since, until) that nobody was given yet. moved counts readings whose person changed, unchanged
        # the others named.
        # Readings of a period assigned to someone are refused (change the assignment instead). Each
        # reading whose person changed is followed again by FollowReadings. Admin only.
        method AttributeReadings(person: string, ids: ?[]int, meter: ?string, since: ?string, until: ?string) -> (
          moved: int,
          unchanged: int
        )

        # People on this gateway, sorted by name.
        method ListPeople() -> (people: []Person)

        # One person, and every assignment period that names them (any meter), oldest first.
        method GetPerson(name: string) -> (person: Person, assignments: []Assignment)

        # Adds a person: name as AssignMeter takes it and unique; identifiers each with a system and a
        # value of 1 to 256 characters without control characters, held by nobody else; lowMgdL and
        # highMgdL thresholds in mg/dL (above 0, below 1000, low below high); unit the preferred one.
        # Admin only.
        method AddPerson(name: string, identifiers: ?[]PersonIdentifier, lowMgdL: ?float, highMgdL: ?float, unit: ?Unit) -> (
          person: Person
        )

        # Changes a person: newName renames them (their readings, periods and identifiers follow),
        # identifiers are added and removed, thresholds and unit set (or cleared with clearLow,
        # clearHigh, clearUnit). Admin only.
        method EditPerson(
          name: string,
          newName: ?string,
          addIdentifiers: ?[]PersonIdentifier,
          removeIdentifiers: ?[]PersonIdentifier,
          lowMgdL: ?float,
          highMgdL: ?float,
          clearLow: ?bool,
          clearHigh: ?bool,
          unit: ?Unit,
          clearUnit: ?bool
        ) -> (person: Person)

        # Removes a person. A person with readings needs force: their readings stay (meter, values,
        # times) without a person, and the assignment periods naming them are removed (their meters are
        # unassigned in those periods). Admin only.
        method RemovePerson(name: string, force: ?bool) -> (releasedReadings: int, removedAssignments: int)

        # The gateway's identity (a random UUID made once per database; FHIR exports scope person
        # identifiers with it), how many people are known and how many readings wait for an attribution.
        method GetPeopleStatus() -> (gateway: string, people: int, unattributed: int)

        # Pairs with a meter; needs 'more'. Replies stream the pairing state; when it is
        # waitingForPasskey, send the PIN the meter shows with SubmitPasskey (on another connection).
        # The last reply says paired; a failure ends the call with PairingFailed. Admin only.
        method Pair(meter: string) -> (meter: string, state: (pairing, waitingForPasskey, paired, failed), message: ?string)

        # Answers a passkey request of a running Pair: passkey is the 6 digits the meter shows.
        # Admin only.
        method SubmitPasskey(meter: string, passkey: string) -> ()

        # A consistent copy of the database (SQLite's online backup API, made at any time, also during a
        # sync; it keeps the database's identity); needs 'more'. The daemon writes the copy to a file in
        # its own directory, checks it (integrity_check), unlinks it and streams its bytes: every reply
        # carries the copy's size, readings, databaseId and schemaVersion, and one part of its bytes
        # (data, base64, at offset); the last reply has the last part. Admin only.
        method Backup() -> (size: int, readings: int, databaseId: ?string, schemaVersion: int, offset: int, data: string)

        # Sends one part of a database file to restore (data: base64, at most 32 KiB before encoding)
        # into a staging file next to the database; upload names the upload (8 to 64 letters, digits,
        # '-' or '_'), offset must be the size received so far (0 starts a new upload and drops any
        # other). size is the size received. Admin only.
        method RestoreUpload(upload: string, offset: int, data: string) -> (size: int)

        # Restores the uploaded database: checks it (integrity_check; a sugard database with a schema
        # version up to the daemon's, migrated when older), gives it a new databaseId (followers start
        # over instead of skipping), keeps the current database as <database>.before-restore-<time> next
        # to it and swaps the new one in (rename); the daemon goes on serving from it. A file that is not
        # a sound sugard database gets InvalidDatabase and changes nothing. Admin only.
        method Restore(upload: string) -> (
          path: string,
          size: int,
          readings: int,
          databaseId: ?string,
          previousDatabaseId: ?string,
          schemaVersion: int,
          migratedFrom: ?int,
          keptAs: ?string
        )

        # Checks the whole database file now (PRAGMA integrity_check on a connection of its own; reads and
        # writes go on meanwhile) and returns the check (result ok or damaged; failed when it could not
        # run). The result also shows in the status (daemon.storage.check). Admin only.
        method CheckStorage() -> (check: StorageCheck)

        # Recorded sync sessions, newest first; limit defaults to 50 (at most 10000).
        method ListSyncSessions(meter: ?string, limit: ?int) -> (sessions: []Session)

        # No meter with this id is known.
        error MeterNotFound (meter: string, message: ?string)

        # No person with this name is known.
        error PersonNotFound (person: string, message: ?string)

        # There is no usable Bluetooth adapter (absent, powered off, or BlueZ not running).
        error AdapterUnavailable (message: ?string)

        # The caller may not call this method: read methods need the socket group, mutating ones the
        # admin group (or root).
        error PermissionDenied (method: string, message: ?string)

        # A sync of this meter (or of every meter) is already running.
        error SyncInProgress (meter: ?string, message: ?string)

        # The database could not be read or written.
        error StorageError (code: ?string, message: ?string)

        # A file given to Restore is not a sound sugard database (not SQLite, damaged, another schema, or
        # a schema newer than the daemon's); nothing was changed.
        error InvalidDatabase (message: string)

        # A parameter has the right type but a value the method cannot use.
        error InvalidParameter (parameter: string, message: ?string)

        # Pairing was refused, timed out, or the passkey was wrong (pair again to retry).
        error PairingFailed (meter: ?string, message: ?string)

        # The sync failed (the message says why; readings received before the failure were kept).
        error SyncFailed (meter: ?string, message: ?string)

        # The watcher fell too far behind and was dropped; call Watch again for a fresh snapshot.
        error SlowConsumer (message: ?string)

        # The daemon is shutting down.
        error ShuttingDown (message: ?string)

        """#
}
