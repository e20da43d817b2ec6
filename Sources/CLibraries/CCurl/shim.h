#ifndef SUGARD_CCURL_SHIM_H
#define SUGARD_CCURL_SHIM_H
// libcurl for HTTPClient (its only importer). curl_easy_setopt and curl_easy_getinfo are variadic,
// which Swift cannot call: one typed wrapper per argument type. The body collector and the
// cancellation check are C callbacks here so Swift passes only plain pointers.
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

static inline CURLcode sugard_curl_setopt_long(CURL *curl, CURLoption option, long value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode sugard_curl_setopt_string(CURL *curl, CURLoption option, const char *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode sugard_curl_setopt_slist(CURL *curl, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode sugard_curl_setopt_pointer(CURL *curl, CURLoption option, void *value) {
    return curl_easy_setopt(curl, option, value);
}
static const long SUGARD_CURL_GLOBAL_DEFAULT = CURL_GLOBAL_DEFAULT;
static const size_t SUGARD_CURL_ERROR_SIZE = CURL_ERROR_SIZE;
static inline CURLcode sugard_curl_getinfo_long(CURL *curl, CURLINFO info, long *value) {
    return curl_easy_getinfo(curl, info, value);
}

/// A response body as it arrives (malloc'd; the caller frees `data`). `limit` caps it.
typedef struct {
    char *data;
    size_t length;
    size_t capacity;
    size_t limit;
} sugard_curl_buffer;

static size_t sugard_curl_write(char *ptr, size_t size, size_t nmemb, void *userdata) {
    sugard_curl_buffer *buffer = (sugard_curl_buffer *)userdata;
    size_t count = size * nmemb;
    if (buffer->length + count > buffer->limit) return 0;  // too large: the transfer fails
    if (buffer->length + count > buffer->capacity) {
        size_t capacity = buffer->capacity ? buffer->capacity : 1024;
        while (capacity < buffer->length + count) capacity *= 2;
        char *data = (char *)realloc(buffer->data, capacity);
        if (!data) return 0;
        buffer->data = data;
        buffer->capacity = capacity;
    }
    memcpy(buffer->data + buffer->length, ptr, count);
    buffer->length += count;
    return count;
}

/// Collects the response body into `buffer`.
static inline CURLcode sugard_curl_collect_body(CURL *curl, sugard_curl_buffer *buffer) {
    CURLcode rc = curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, sugard_curl_write);
    if (rc != CURLE_OK) return rc;
    return curl_easy_setopt(curl, CURLOPT_WRITEDATA, (void *)buffer);
}

static int sugard_curl_progress(void *clientp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal; (void)dlnow; (void)ultotal; (void)ulnow;
    return __atomic_load_n((const int *)clientp, __ATOMIC_ACQUIRE) != 0;  // non-zero aborts the transfer
}

/// Aborts the transfer (CURLE_ABORTED_BY_CALLBACK) soon after `*flag` becomes non-zero.
static inline CURLcode sugard_curl_cancel_on(CURL *curl, int *flag) {
    CURLcode rc = curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, sugard_curl_progress);
    if (rc != CURLE_OK) return rc;
    rc = curl_easy_setopt(curl, CURLOPT_XFERINFODATA, (void *)flag);
    if (rc != CURLE_OK) return rc;
    return curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
}

static inline void sugard_curl_set_flag(int *flag) { __atomic_store_n(flag, 1, __ATOMIC_RELEASE); }
#endif
