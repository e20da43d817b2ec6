// libmosquitto (Debian libmosquitto-dev, pkg-config libmosquitto), imported only by the MQTT module.
#include <mosquitto.h>
#include <mqtt_protocol.h>

// Macros Swift cannot import, as constants.
static const int CMOSQ_PROTOCOL_V5 = MQTT_PROTOCOL_V5;
static const int CMOSQ_SSL_VERIFY_PEER = 1;
