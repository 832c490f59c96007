/* The framing of v2 records, shared by the record walker (_walker.c) and the
 * column decoder (_columns.c): one reading of varints, lengths and records,
 * checked against the bytes present, so both accept and refuse exactly the
 * same bytes with the same messages (walker.py's pure-Python twin mirrors it).
 *
 * Included by each module (static functions: one copy per module, no symbols
 * shared between shared objects). Needs Python.h and stdint.h first.
 */
#ifndef SAMSA_RECORDS_FRAMING_H
#define SAMSA_RECORDS_FRAMING_H
/* A refusal, formatted only once the walk stopped: the message and its args. */
typedef struct {
    Py_ssize_t pos;
    const char *fmt;   /* PyUnicode_FromFormat format taking up to three long longs */
    long long a, b, c;
} fault_t;

/* the one fault walk_prefix reads as "the rest is in the next piece" */
static const char PAST_END[] = "varint runs past the end of the data";

#define FAIL(F, P, FMT, A, B, C) \
    do { (F)->pos = (P); (F)->fmt = (FMT); (F)->a = (A); (F)->b = (B); (F)->c = (C); return -1; } while (0)

/* Unsigned LEB128 of at most max_bytes, never reading at or after end; then
 * zigzag. Mirrors protocol/records/varint.py decode_uvarint/decode_varint/
 * decode_varlong, messages included. */
static int
read_varint(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t end, int max_bytes, int64_t *out,
            fault_t *f)
{
    Py_ssize_t i = *pos, limit = *pos + max_bytes;
    uint64_t result = 0;
    int shift = 0, overflow = 0;
    for (;;) {
        if (i >= end)
            FAIL(f, i, PAST_END, 0, 0, 0);
        if (i >= limit)
            FAIL(f, i, max_bytes == 5 ? "varint longer than 5 bytes" : "varint longer than 10 bytes",
                 0, 0, 0);
        uint8_t b = p[i++];
        uint64_t bits = b & 0x7F;
        /* the 10th byte of a varlong lands at bit 63: only its lowest bit fits */
        if (shift == 63 && bits > 1)
            overflow = 1;
        result |= bits << shift;
        if (b < 0x80)
            break;
        shift += 7;
    }
    if (max_bytes == 5) {
        if (result > 0xFFFFFFFFULL)
            FAIL(f, i, "varint overflows int32", 0, 0, 0);
    } else if (overflow) {
        FAIL(f, i, "varlong overflows int64", 0, 0, 0);
    }
    *out = (int64_t)((result >> 1) ^ (~(result & 1) + 1));
    *pos = i;
    return 0;
}

/* One record's fields: positions are absolute in the buffer. */
typedef struct {
    int64_t timestamp_delta;
    int64_t offset_delta;
    Py_ssize_t key_pos, value_pos, headers_pos, end;
    int64_t key_len, value_len, header_count;  /* -1: null key/value */
} record_t;

/* A varint-length-prefixed nullable field (key, value, header value). */
static int
read_bytes_field(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t rend, int64_t *len,
                 const char *what_invalid, const char *what_past, long long index, fault_t *f)
{
    if (read_varint(p, pos, rend, 5, len, f))
        return -1;
    if (*len < 0) {
        if (*len != -1)
            FAIL(f, *pos, what_invalid, index, *len, 0);
        return 0;
    }
    if (*len > rend - *pos)
        FAIL(f, *pos, what_past, index, *len, 0);
    *pos += *len;
    return 0;
}

/* Read the record at *pos (which must end by end) into r; *pos moves past it. */
static int
read_record(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t end, long long index, record_t *r,
            fault_t *f)
{
    int64_t length, v;
    if (read_varint(p, pos, end, 5, &length, f))
        return -1;
    if (length < 6 || length > end - *pos)
        FAIL(f, *pos, "record %lld: length %lld invalid or past the end", index, length, 0);
    Py_ssize_t rend = *pos + length;
    r->end = rend;
    *pos += 1;  /* attributes: no bit is defined for records */
    if (read_varint(p, pos, rend, 10, &r->timestamp_delta, f))
        return -1;
    if (read_varint(p, pos, rend, 5, &r->offset_delta, f))
        return -1;
    if (read_bytes_field(p, pos, rend, &r->key_len, "record %lld: invalid key length %lld",
                         "record %lld: key length %lld past the end of the record", index, f))
        return -1;
    r->key_pos = r->key_len >= 0 ? *pos - r->key_len : *pos;
    if (read_bytes_field(p, pos, rend, &r->value_len, "record %lld: invalid value length %lld",
                         "record %lld: value length %lld past the end of the record", index, f))
        return -1;
    r->value_pos = r->value_len >= 0 ? *pos - r->value_len : *pos;
    if (read_varint(p, pos, rend, 5, &r->header_count, f))
        return -1;
    /* each header takes at least two bytes (its two length varints) */
    if (r->header_count < 0 || r->header_count * 2 > rend - *pos)
        FAIL(f, *pos, "record %lld: invalid header count %lld", index, r->header_count, 0);
    r->headers_pos = *pos;
    for (int64_t h = 0; h < r->header_count; h++) {
        if (read_varint(p, pos, rend, 5, &v, f))
            return -1;
        if (v < 0 || v > rend - *pos)
            FAIL(f, *pos, "record %lld: invalid header key length %lld", index, v, 0);
        *pos += v;
        if (read_bytes_field(p, pos, rend, &v, "record %lld: invalid header value length %lld",
                             "record %lld: header value length %lld past the end of the record",
                             index, f))
            return -1;
    }
    if (*pos != rend)
        FAIL(f, *pos, "record %lld: declared %lld bytes but its fields used %lld", index, length,
             length - (rend - *pos));
    return 0;
}

/* A refusal as Python sees it: protocol.records.errors.CorruptRecordError
 * with the message and the position, the one exception both modules raise. */
static PyObject *corrupt_error;

static PyObject *
raise_fault(const fault_t *f)
{
    PyObject *msg = PyUnicode_FromFormat(f->fmt, f->a, f->b, f->c);
    if (msg == NULL)
        return NULL;
    PyObject *exc = PyObject_CallFunction(corrupt_error, "(Nn)", msg, f->pos);
    if (exc != NULL) {
        PyErr_SetObject(corrupt_error, exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* Each module's Py_mod_exec slot: find the exception class once. */
static int
load_corrupt_error(PyObject *module)
{
    (void)module;
    PyObject *errors = PyImport_ImportModule("samsa.protocol.records.errors");
    if (errors == NULL)
        return -1;
    corrupt_error = PyObject_GetAttrString(errors, "CorruptRecordError");
    Py_DECREF(errors);
    return corrupt_error == NULL ? -1 : 0;
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, load_corrupt_error},
    {0, NULL},
};

#endif
