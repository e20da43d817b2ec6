#ifndef CBENCHYARDSTICKS_H
#define CBENCHYARDSTICKS_H

#include <stddef.h>
#include <stdint.h>

/// The C yardstick of `sugar-bench parse`: decodes every length-prefixed Glucose Measurement of
/// `corpus` with the checks the Swift parser makes (shape length from the flags, exact length, Base
/// Time ranges) into a plain struct. Returns the number of packets, or -1 - index of the first bad one.
/// `checksum` receives the same fold of decoded fields the Swift pass computes.
long sugar_yardstick_parse(const uint8_t *corpus, size_t length, uint64_t *checksum);

#endif
