// libmosquitto (Debian libmosquitto-dev, pkg-config libmosquitto), imported only by the MQTT module.
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

// Macros Swift cannot import, as constants.
static const int CMOSQ_PROTOCOL_V5 = MQTT_PROTOCOL_V5;
static const int CMOSQ_SSL_VERIFY_PEER = 1;

// Holds (1) or releases (0) the socket's partial segments: a burst of publishes written while
// corked leaves in full segments when released (TCP_CORK is a Linux socket option Swift's Glibc
// module does not carry).
static inline int cmosq_cork(int fd, int on) { return setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on); }
