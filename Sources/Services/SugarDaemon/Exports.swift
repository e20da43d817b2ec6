// sugard's settings (DaemonConfig, DaemonCommandLine) live in SugarConfig, which the fuzz targets
// link without the rest of the daemon; users of SugarDaemon see them as before.
@_exported import SugarConfig
