/* The column decoder of v2 records in C: protocol/records/columns.py is its
 * contract, its pure-Python twin (the fallback when this module is not built)
 * and its documentation. Both fill the same buffers with the same bytes and
 * refuse the same records with the same message and position
 * (tests/protocol/test_columns.py checks them against each other).
 *
 * decode_records(data, pos, end, count, base_offset, base_timestamp,
 *                max_timestamp, timestamp_type, min_offset, end_offset, cols) -> rows
 * next_fetch_offset(records, position) -> offset (a walk over batch headers only)
 *
 * Why C: a Spark task reads every record of a range; one Python object per
 * record (and per key and value) cost more than the rest of the read. Here a
 * record costs its varint reads and two memcpy, into buffers that become
 * Arrow arrays without another copy (the Python caller wraps them).
 *
 * Two passes over the records: the first checks the framing exactly as the
 * walker does (the shared _framing.h: every length against the bytes
 * present) and sums the sizes of the rows kept; the buffers grow once; the
 * second copies. No Python object is made between the passes, so the bytes
 * cannot change under them; the second pass bounds its reads all the same.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_framing.h"

/* cols: the RecordColumns buffers, in this order (columns.py COLUMN_NAMES). */
enum {
    KEY_OFFSETS, KEY_DATA, KEY_VALID, VALUE_OFFSETS, VALUE_DATA, VALUE_VALID,
    OFFSETS, TIMESTAMPS, TIMESTAMP_TYPES,
    /* with headers */
    HEADER_OFFSETS, HEADER_VALID, HKEY_OFFSETS, HKEY_DATA, HVALUE_OFFSETS, HVALUE_DATA,
    HVALUE_VALID,
    N_PLAIN = TIMESTAMP_TYPES + 1,
    N_ALL = HVALUE_VALID + 1,
};

/* What the kept rows add to each column. */
typedef struct {
    int64_t rows, key_bytes, value_bytes, headers, hkey_bytes, hvalue_bytes;
} sizes_t;

/* Arrow binary/string offsets are int32: a column's data must stay below 2 GiB. */
#define MAX_DATA ((int64_t)INT32_MAX)

static inline int32_t
get_i32(PyObject *ba, Py_ssize_t index)
{
    int32_t v;
    memcpy(&v, PyByteArray_AS_STRING(ba) + index * 4, 4);
    return v;
}

static inline void
put_i32(char *p, int32_t v) { memcpy(p, &v, 4); }

static inline void
put_i64(char *p, int64_t v) { memcpy(p, &v, 8); }

static int resize(PyObject *ba, Py_ssize_t want);

/* Grow a bitmap from `bits` to `bits + add` bits, the new bits cleared. */
static int
grow_bitmap(PyObject *ba, int64_t bits, int64_t add)
{
    Py_ssize_t old = PyByteArray_GET_SIZE(ba), want = (Py_ssize_t)((bits + add + 7) / 8);
    if (want <= old)
        return 0;
    if (resize(ba, want) < 0)
        return -1;
    memset(PyByteArray_AS_STRING(ba) + old, 0, (size_t)(want - old));
    return 0;
}

static inline void
set_bit(PyObject *ba, int64_t bit)
{
    PyByteArray_AS_STRING(ba)[bit >> 3] |= (char)(1 << (bit & 7));
}

/* Resize to `want` bytes, doubling the allocation when it must grow: bytearray's own
 * growth (an eighth more each time) copied a column of 10 MB about eight times over as
 * batch after batch was appended to it. A resize to a size of at least half the
 * allocation keeps the allocation (CPython's bytearray_resize). */
static int
resize(PyObject *ba, Py_ssize_t want)
{
    Py_ssize_t size = PyByteArray_GET_SIZE(ba);
    if (want >= ((PyByteArrayObject *)ba)->ob_alloc && want < size * 2 &&
        PyByteArray_Resize(ba, size * 2) < 0)
        return -1;
    return PyByteArray_Resize(ba, want);
}

static int
grow(PyObject *ba, int64_t add)
{
    return add ? resize(ba, PyByteArray_GET_SIZE(ba) + (Py_ssize_t)add) : 0;
}

static PyObject *
changed(void)
{
    PyErr_SetString(PyExc_RuntimeError, "the records' bytes changed while they were decoded");
    return NULL;
}

/* Header key and value lengths of a record whose framing read_record checked. */
static int
read_header(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t rend, int64_t *klen, Py_ssize_t *kpos,
            int64_t *vlen, Py_ssize_t *vpos)
{
    fault_t unused;
    if (read_varint(p, pos, rend, 5, klen, &unused) || *klen < 0 || *klen > rend - *pos)
        return -1;
    *kpos = *pos;
    *pos += *klen;
    if (read_varint(p, pos, rend, 5, vlen, &unused) || *vlen < -1 || *vlen > rend - *pos)
        return -1;
    *vpos = *pos;
    if (*vlen > 0)
        *pos += *vlen;
    return 0;
}

static PyObject *
decode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError,
                        "decode_records(data, pos, end, count, base_offset, base_timestamp, "
                        "max_timestamp, timestamp_type, min_offset, end_offset, cols) takes 11 "
                        "arguments");
        return NULL;
    }
    Py_ssize_t pos, end, count;
    long long base_offset, base_ts, max_ts, min_offset, end_offset;
    int ts_type;
    pos = PyLong_AsSsize_t(args[1]);
    end = PyLong_AsSsize_t(args[2]);
    count = PyLong_AsSsize_t(args[3]);
    base_offset = PyLong_AsLongLong(args[4]);
    base_ts = PyLong_AsLongLong(args[5]);
    max_ts = PyLong_AsLongLong(args[6]);
    ts_type = (int)PyLong_AsLong(args[7]);
    min_offset = PyLong_AsLongLong(args[8]);
    end_offset = PyLong_AsLongLong(args[9]);
    if (PyErr_Occurred())
        return NULL;
    PyObject *cols = args[10];
    if (!PyTuple_Check(cols) || (PyTuple_GET_SIZE(cols) != N_PLAIN && PyTuple_GET_SIZE(cols) != N_ALL)) {
        PyErr_SetString(PyExc_TypeError, "cols must be a tuple of 9 or 16 bytearrays");
        return NULL;
    }
    int with_headers = PyTuple_GET_SIZE(cols) == N_ALL;
    PyObject *c[N_ALL];
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cols); i++) {
        c[i] = PyTuple_GET_ITEM(cols, i);
        if (!PyByteArray_Check(c[i])) {
            PyErr_SetString(PyExc_TypeError, "cols must be a tuple of bytearrays");
            return NULL;
        }
    }
    /* the columns' current lengths: rows so far, and the data offsets they end at */
    int64_t rows = PyByteArray_GET_SIZE(c[OFFSETS]) / 8;
    if (PyByteArray_GET_SIZE(c[KEY_OFFSETS]) != (rows + 1) * 4 ||
        PyByteArray_GET_SIZE(c[VALUE_OFFSETS]) != (rows + 1) * 4 ||
        PyByteArray_GET_SIZE(c[TIMESTAMPS]) != rows * 8 ||
        PyByteArray_GET_SIZE(c[TIMESTAMP_TYPES]) != rows * 4 ||
        (with_headers && PyByteArray_GET_SIZE(c[HEADER_OFFSETS]) != (rows + 1) * 4)) {
        PyErr_SetString(PyExc_ValueError, "the columns' lengths do not agree");
        return NULL;
    }
    int64_t nheaders = with_headers ? PyByteArray_GET_SIZE(c[HKEY_OFFSETS]) / 4 - 1 : 0;
    if (with_headers && (nheaders < 0 ||
                         PyByteArray_GET_SIZE(c[HVALUE_OFFSETS]) != (nheaders + 1) * 4)) {
        PyErr_SetString(PyExc_ValueError, "the header columns' lengths do not agree");
        return NULL;
    }

    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (pos < 0 || end > view.len || pos > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "pos/end outside the buffer");
        return NULL;
    }
    const uint8_t *p = (const uint8_t *)view.buf;
    fault_t f = {0};
    record_t r;
    sizes_t s = {0};

    /* pass 1: the walker's checks (walk_records with consecutive=False), and the sizes */
    Py_ssize_t q = pos;
    if (count < 0 || count > (end - pos) / 7) {
        f.pos = pos;
        f.fmt = "records count %lld cannot fit in %lld bytes of records";
        f.a = count;
        f.b = end - pos;
        goto fault;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (read_record(p, &q, end, (long long)i, &r, &f))
            goto fault;
        int64_t offset = (int64_t)base_offset + r.offset_delta;
        if (offset < min_offset || offset >= end_offset)
            continue;
        s.rows++;
        s.key_bytes += r.key_len > 0 ? r.key_len : 0;
        s.value_bytes += r.value_len > 0 ? r.value_len : 0;
        if (with_headers) {
            s.headers += r.header_count;
            /* the header bytes are within the record: its length bounds them */
            s.hkey_bytes += r.end - r.headers_pos;
            s.hvalue_bytes += r.end - r.headers_pos;
        }
    }
    if (q != end) {
        f.pos = q;
        f.fmt = "%lld bytes left after the last of %lld records";
        f.a = end - q;
        f.b = count;
        goto fault;
    }

    int32_t key_end = get_i32(c[KEY_OFFSETS], rows), value_end = get_i32(c[VALUE_OFFSETS], rows);
    int32_t header_end = 0, hkey_end = 0, hvalue_end = 0;
    if (with_headers) {
        header_end = get_i32(c[HEADER_OFFSETS], rows);
        hkey_end = get_i32(c[HKEY_OFFSETS], nheaders);
        hvalue_end = get_i32(c[HVALUE_OFFSETS], nheaders);
    }
    if (key_end + s.key_bytes > MAX_DATA || value_end + s.value_bytes > MAX_DATA ||
        header_end + s.headers > MAX_DATA || hkey_end + s.hkey_bytes > MAX_DATA ||
        hvalue_end + s.hvalue_bytes > MAX_DATA) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_OverflowError,
                        "the columns would pass 2 GiB: take them before decoding more");
        return NULL;
    }
    /* grow every buffer once (the header data by an upper bound, cut back below) */
    Py_ssize_t key_data0 = PyByteArray_GET_SIZE(c[KEY_DATA]);
    Py_ssize_t value_data0 = PyByteArray_GET_SIZE(c[VALUE_DATA]);
    if (grow(c[KEY_OFFSETS], s.rows * 4) || grow(c[KEY_DATA], s.key_bytes) ||
        grow_bitmap(c[KEY_VALID], rows, s.rows) ||
        grow(c[VALUE_OFFSETS], s.rows * 4) || grow(c[VALUE_DATA], s.value_bytes) ||
        grow_bitmap(c[VALUE_VALID], rows, s.rows) ||
        grow(c[OFFSETS], s.rows * 8) || grow(c[TIMESTAMPS], s.rows * 8) ||
        grow(c[TIMESTAMP_TYPES], s.rows * 4))
        goto error;
    Py_ssize_t hkey_data0 = 0, hvalue_data0 = 0;
    if (with_headers) {
        hkey_data0 = PyByteArray_GET_SIZE(c[HKEY_DATA]);
        hvalue_data0 = PyByteArray_GET_SIZE(c[HVALUE_DATA]);
        if (grow(c[HEADER_OFFSETS], s.rows * 4) || grow_bitmap(c[HEADER_VALID], rows, s.rows) ||
            grow(c[HKEY_OFFSETS], s.headers * 4) || grow(c[HKEY_DATA], s.hkey_bytes) ||
            grow(c[HVALUE_OFFSETS], s.headers * 4) || grow(c[HVALUE_DATA], s.hvalue_bytes) ||
            grow_bitmap(c[HVALUE_VALID], nheaders, s.headers))
            goto error;
    }

    /* pass 2: copy (nothing between the passes ran Python code) */
    char *key_off = PyByteArray_AS_STRING(c[KEY_OFFSETS]) + (rows + 1) * 4;
    char *key_data = PyByteArray_AS_STRING(c[KEY_DATA]) + key_data0;
    char *value_off = PyByteArray_AS_STRING(c[VALUE_OFFSETS]) + (rows + 1) * 4;
    char *value_data = PyByteArray_AS_STRING(c[VALUE_DATA]) + value_data0;
    char *offsets = PyByteArray_AS_STRING(c[OFFSETS]) + rows * 8;
    char *stamps = PyByteArray_AS_STRING(c[TIMESTAMPS]) + rows * 8;
    char *types = PyByteArray_AS_STRING(c[TIMESTAMP_TYPES]) + rows * 4;
    char *header_off = NULL, *hkey_off = NULL, *hkey_data = NULL, *hvalue_off = NULL,
         *hvalue_data = NULL;
    if (with_headers) {
        header_off = PyByteArray_AS_STRING(c[HEADER_OFFSETS]) + (rows + 1) * 4;
        hkey_off = PyByteArray_AS_STRING(c[HKEY_OFFSETS]) + (nheaders + 1) * 4;
        hkey_data = PyByteArray_AS_STRING(c[HKEY_DATA]) + hkey_data0;
        hvalue_off = PyByteArray_AS_STRING(c[HVALUE_OFFSETS]) + (nheaders + 1) * 4;
        hvalue_data = PyByteArray_AS_STRING(c[HVALUE_DATA]) + hvalue_data0;
    }
    int64_t row = rows, header = nheaders, kept = 0;
    int64_t hkey_used = 0, hvalue_used = 0;
    q = pos;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (read_record(p, &q, end, (long long)i, &r, &f)) {
            PyBuffer_Release(&view);
            return changed();
        }
        int64_t offset = (int64_t)base_offset + r.offset_delta;
        if (offset < min_offset || offset >= end_offset)
            continue;
        if (kept == s.rows) {
            PyBuffer_Release(&view);
            return changed();
        }
        if (r.key_len >= 0) {
            memcpy(key_data, p + r.key_pos, (size_t)r.key_len);
            key_data += r.key_len;
            key_end += (int32_t)r.key_len;
            set_bit(c[KEY_VALID], row);
        }
        put_i32(key_off, key_end);
        key_off += 4;
        if (r.value_len >= 0) {
            memcpy(value_data, p + r.value_pos, (size_t)r.value_len);
            value_data += r.value_len;
            value_end += (int32_t)r.value_len;
            set_bit(c[VALUE_VALID], row);
        }
        put_i32(value_off, value_end);
        value_off += 4;
        put_i64(offsets, offset);
        offsets += 8;
        /* LogAppendTime: every record has the batch's max timestamp, as Kafka's readers say */
        put_i64(stamps, ts_type == 1 ? (int64_t)max_ts
                                     : (int64_t)((uint64_t)base_ts + (uint64_t)r.timestamp_delta));
        stamps += 8;
        put_i32(types, ts_type);
        types += 4;
        if (with_headers) {
            Py_ssize_t h = r.headers_pos;
            for (int64_t k = 0; k < r.header_count; k++) {
                int64_t klen, vlen;
                Py_ssize_t kpos, vpos;
                if (read_header(p, &h, r.end, &klen, &kpos, &vlen, &vpos) ||
                    hkey_used + klen > s.hkey_bytes ||
                    hvalue_used + (vlen > 0 ? vlen : 0) > s.hvalue_bytes) {
                    PyBuffer_Release(&view);
                    return changed();
                }
                memcpy(hkey_data, p + kpos, (size_t)klen);
                hkey_data += klen;
                hkey_used += klen;
                hkey_end += (int32_t)klen;
                put_i32(hkey_off, hkey_end);
                hkey_off += 4;
                if (vlen >= 0) {
                    memcpy(hvalue_data, p + vpos, (size_t)vlen);
                    hvalue_data += vlen;
                    hvalue_used += vlen;
                    hvalue_end += (int32_t)vlen;
                    set_bit(c[HVALUE_VALID], header);
                }
                put_i32(hvalue_off, hvalue_end);
                hvalue_off += 4;
                header++;
            }
            /* Spark's source: a record without headers has a null array, not an empty one */
            if (r.header_count > 0)
                set_bit(c[HEADER_VALID], row);
            header_end += (int32_t)r.header_count;
            put_i32(header_off, header_end);
            header_off += 4;
        }
        row++;
        kept++;
    }
    PyBuffer_Release(&view);
    if (kept != s.rows || header - nheaders != s.headers)
        return changed();
    if (with_headers &&
        (PyByteArray_Resize(c[HKEY_DATA], hkey_data0 + (Py_ssize_t)hkey_used) < 0 ||
         PyByteArray_Resize(c[HVALUE_DATA], hvalue_data0 + (Py_ssize_t)hvalue_used) < 0))
        return NULL;
    return PyLong_FromLongLong((long long)kept);

fault:
    PyBuffer_Release(&view);
    return raise_fault(&f);
error:
    PyBuffer_Release(&view);
    return NULL;
}

/* The v2 batch header fields the walk below reads (big-endian, as on the wire). */
#define BATCH_OVERHEAD 61
#define LOG_OVERHEAD 12
#define MIN_BATCH_LENGTH (BATCH_OVERHEAD - LOG_OVERHEAD)
#define LAST_OFFSET_DELTA_AT 23

static inline uint64_t
get_be(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = v << 8 | p[i];
    return v;
}

/* next_fetch_offset(records, position): after the last complete batch of a fetched
 * partition's records, hopping from batch header to batch header (no record is read), so
 * that the next Fetch can go out before these records are decoded, however many batches
 * they hold. columns.py's next_fetch_offset_py is its twin and says when they stop. */
static PyObject *
next_fetch_offset(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "next_fetch_offset(records, position) takes 2 arguments");
        return NULL;
    }
    long long position = PyLong_AsLongLong(args[1]);
    if (position == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *p = (const uint8_t *)view.buf;
    Py_ssize_t end = view.len, pos = 0;
    int64_t following = position;
    while (end - pos >= BATCH_OVERHEAD) {
        int64_t base = (int64_t)get_be(p + pos, 8);
        int32_t length = (int32_t)get_be(p + pos + 8, 4);
        int32_t delta = (int32_t)get_be(p + pos + LAST_OFFSET_DELTA_AT, 4);
        int64_t after;
        /* a length below the minimum is the decoder's error to name; a cut batch is
         * fetched again; an offset past int64 is no offset to fetch from */
        if (length < MIN_BATCH_LENGTH || length > end - pos - LOG_OVERHEAD ||
            __builtin_add_overflow(base, (int64_t)delta + 1, &after))
            break;
        if (after > following)
            following = after;
        pos += LOG_OVERHEAD + length;
    }
    PyBuffer_Release(&view);
    return PyLong_FromLongLong((long long)following);
}

static PyMethodDef methods[] = {
    {"decode_records", (PyCFunction)(void (*)(void))decode_records, METH_FASTCALL,
     "decode_records(data, pos, end, count, base_offset, base_timestamp, max_timestamp, "
     "timestamp_type, min_offset, end_offset, cols) -> rows: see columns.py"},
    {"next_fetch_offset", (PyCFunction)(void (*)(void))next_fetch_offset, METH_FASTCALL,
     "next_fetch_offset(records, position) -> offset: see columns.py"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "samsa.protocol.records._columns",
    "Column decoder of v2 records (see protocol/records/columns.py).", 0, methods, slots,
    NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__columns(void)
{
    return PyModuleDef_Init(&moduledef);
}
