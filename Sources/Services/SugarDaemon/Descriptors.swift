import HealthDataSync
import ProcessKit
import SystemIO

extension Daemon {
    /// Raises the soft open-files limit to the hard one before anything is opened, so the
    /// connection caps (which stay below it) are not cut down by a low default soft limit (1024
    /// without the unit's `LimitNOFILE=`), and logs the figure.
    static func raiseDescriptorLimit(logger: Logger) {
        guard let limit = raiseOpenFilesLimit() else {
            logger.warning("open files: the limit (RLIMIT_NOFILE) cannot be read")
            return
        }
        let hard = limit.hard.map(String.init) ?? "unlimited"
        if let failure = limit.failure {
            logger.warning("open files: the soft limit stays \(limit.before) (hard limit \(hard)): raising it failed: \(failure)")
        } else if limit.now > limit.before {
            logger.info("open files: soft limit raised from \(limit.before) to \(limit.now) (hard limit \(hard))")
        } else {
            logger.info("open files: soft limit \(limit.now) (hard limit \(hard))")
        }
    }
}
