// A plain C Glucose Measurement parser: the yardstick `sugar-bench parse` compares the Swift parser to.
#include "CBenchYardsticks.h"

#include <string.h>

struct measurement {
    uint8_t flags;
    uint16_t seq;
    uint16_t year;
    uint8_t month, day, hours, minutes, seconds;
    int16_t offset;
    uint16_t concentration;
    uint8_t type_location;
    uint16_t status;
    uint8_t has_offset, has_concentration, has_status;
};

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static int days_in(int month, int year) {
    switch (month) {
    case 2: return year == 0 || ((year % 4 == 0 && year % 100 != 0) || year % 400 == 0) ? 29 : 28;
    case 4: case 6: case 9: case 11: return 30;
    default: return 31;
    }
}

/// 0 on success, -1 for a short, long or out-of-range packet.
static int parse(const uint8_t *p, size_t n, struct measurement *m) {
    if (n < 10) return -1;
    uint8_t f = p[0];
    size_t need = 10 + ((f & 1) ? 2 : 0) + ((f & 2) ? 3 : 0) + ((f & 8) ? 2 : 0);
    if (n != need) return -1;
    m->flags = f;
    m->seq = le16(p + 1);
    m->year = le16(p + 3);
    m->month = p[5]; m->day = p[6]; m->hours = p[7]; m->minutes = p[8]; m->seconds = p[9];
    if (m->year != 0 && (m->year < 1582 || m->year > 9999)) return -1;
    if (m->month > 12 || m->hours > 23 || m->minutes > 59 || m->seconds > 59) return -1;
    if (m->day > (m->month == 0 ? 31 : days_in(m->month, m->year))) return -1;
    size_t at = 10;
    m->has_offset = f & 1;
    m->offset = 0;
    if (m->has_offset) { m->offset = (int16_t)le16(p + at); at += 2; }
    m->has_concentration = (f & 2) != 0;
    m->concentration = 0; m->type_location = 0;
    if (m->has_concentration) { m->concentration = le16(p + at); m->type_location = p[at + 2]; at += 3; }
    m->has_status = (f & 8) != 0;
    m->status = 0;
    if (m->has_status) m->status = le16(p + at);
    return 0;
}

long sugar_yardstick_parse(const uint8_t *corpus, size_t length, uint64_t *checksum) {
    size_t i = 0;
    long packets = 0;
    uint64_t sum = 0;
    while (i < length) {
        if (i + 2 > length) return -1 - packets;
        size_t n = (size_t)corpus[i] | (size_t)corpus[i + 1] << 8;
        size_t start = i + 2;
        if (start + n > length) return -1 - packets;
        struct measurement m;
        if (parse(corpus + start, n, &m) != 0) return -1 - packets;
        sum += (uint64_t)m.seq + (uint64_t)(m.has_concentration ? m.concentration : 1) + (uint64_t)m.minutes
            + (uint64_t)(m.has_status ? m.status : 0);
        packets += 1;
        i = start + n;
    }
    *checksum = sum;
    return packets;
}
