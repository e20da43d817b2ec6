#ifndef SUGARD_CBLUEZ_SHIM_H
#define SUGARD_CBLUEZ_SHIM_H
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

// ioctl request numbers are function-like macros (_IOR) that Swift cannot import.
static const unsigned long CBLUEZ_HCIGETDEVLIST = HCIGETDEVLIST;
static const unsigned long CBLUEZ_HCIGETDEVINFO = HCIGETDEVINFO;

// ioctl is variadic: Swift cannot call it directly.
static inline int cbluez_ioctl(int fd, unsigned long request, void *argument) {
    return ioctl(fd, request, argument);
}

// Binds an HCI socket to a device and channel (HCI_CHANNEL_MONITOR with HCI_DEV_NONE for btmon's view).
static inline int cbluez_bind_hci(int fd, unsigned short device, unsigned short channel) {
    struct sockaddr_hci address;
    memset(&address, 0, sizeof address);
    address.hci_family = AF_BLUETOOTH;
    address.hci_dev = device;
    address.hci_channel = channel;
    return bind(fd, (struct sockaddr *)&address, sizeof address);
}

// SIGINT/SIGTERM write one byte to a pipe (async-signal-safe), so a poll loop can stop cleanly.
static int cbluez_stop_fd = -1;
static void cbluez_on_stop_signal(int signal_number) {
    (void)signal_number;
    if (cbluez_stop_fd >= 0) {
        char byte = 1;
        ssize_t ignored = write(cbluez_stop_fd, &byte, 1);
        (void)ignored;
    }
}
static inline int cbluez_install_stop_signals(int write_fd) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    cbluez_stop_fd = write_fd;
    action.sa_handler = cbluez_on_stop_signal;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGINT, &action, NULL) != 0) return -1;
    return sigaction(SIGTERM, &action, NULL);
}
#endif
