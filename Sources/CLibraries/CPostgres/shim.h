// libpq (Debian libpq-dev, pkg-config libpq), imported only by the HubStore module.
#include <libpq-fe.h>
