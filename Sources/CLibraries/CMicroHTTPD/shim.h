// libmicrohttpd (Debian libmicrohttpd-dev, pkg-config libmicrohttpd), imported only by the
// HTTPServer module.
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <netinet/in.h>
#include <microhttpd.h>

// MHD_start_daemon is variadic (Swift cannot call it): an internal thread, one listening address,
// a connection limit and a per-connection timeout, nothing else.
static inline struct MHD_Daemon *cmhd_start(const struct sockaddr *address, MHD_AccessHandlerCallback handler, void *context,
                                            unsigned int connectionLimit, unsigned int timeoutSeconds) {
    return MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL_LINUX_ONLY | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                            handler, context, MHD_OPTION_SOCK_ADDR, address, MHD_OPTION_CONNECTION_LIMIT, connectionLimit,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeoutSeconds, MHD_OPTION_END);
}


// A response owning a copy of `data` (the enum constant does not import cleanly into Swift).
static inline struct MHD_Response *cmhd_copy_response(size_t size, const void *data) {
    return MHD_create_response_from_buffer(size, (void *)data, MHD_RESPMEM_MUST_COPY);
}
