#ifndef SUGARD_CBLUEZ_SHIM_H
#define SUGARD_CBLUEZ_SHIM_H
#include <bluetooth/bluetooth.h>
#endif
