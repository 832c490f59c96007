/* The record walker of v2 batches in C: protocol/records/walker.py is its
 * contract, its pure-Python twin (the fallback when this module is not built)
 * and its documentation. Both must accept and refuse exactly the same bytes,
 * with the same message and position (tests/protocol/test_walker.py fuzzes
 * them against each other).
 *
 * walk_records(buf, pos, end, count, consecutive, fields, first=0)
 * walk_prefix(buf, pos, end, count, consecutive, first) -> (pos, walked)
 *
 * Why C: the produce path walks every record of every batch, as Kafka's
 * LogValidator does, and a Python loop over ~1000 records per batch would
 * cost more than the rest of the append. Here a record costs a few varint
 * reads and never touches its key or value bytes.
 *
 * Plain CPython C API, no third-party headers. Untrusted input: every length
 * is checked against the bytes present before it moves the position, and all
 * arithmetic is on 64-bit values that cannot overflow (lengths are int32).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_framing.h"

/* The (key pos, key len, value pos, value len) of each header, as a tuple of
 * tuples. read_record validated these bytes, but the objects built here can
 * run a collection, and a finalizer can rewrite a bytearray's contents (not
 * its size: the buffer is exported): so the reads are bounded again, by the
 * record's end, and a length that no longer fits is an error, not a read
 * outside the buffer. */
static PyObject *
header_fields(const uint8_t *p, Py_ssize_t pos, Py_ssize_t rend, int64_t count)
{
    PyObject *out = PyTuple_New((Py_ssize_t)count);
    if (out == NULL)
        return NULL;
    fault_t unused;
    for (int64_t h = 0; h < count; h++) {
        int64_t klen, vlen;
        if (read_varint(p, &pos, rend, 5, &klen, &unused) || klen < 0 || klen > rend - pos)
            goto changed;
        Py_ssize_t kpos = pos;
        pos += klen;
        if (read_varint(p, &pos, rend, 5, &vlen, &unused) || vlen < -1 || vlen > rend - pos)
            goto changed;
        Py_ssize_t vpos = pos;
        if (vlen > 0)
            pos += vlen;
        PyObject *t = Py_BuildValue("(nLnL)", kpos, (long long)klen, vpos, (long long)vlen);
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, (Py_ssize_t)h, t);
    }
    return out;
changed:
    Py_DECREF(out);
    PyErr_SetString(PyExc_RuntimeError, "the records' bytes changed while they were walked");
    return NULL;
}

static int
as_ssize(PyObject *o, Py_ssize_t *out)
{
    *out = PyLong_AsSsize_t(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* The arguments both entry points share: buf, pos, end, count, consecutive,
 * then fields (walk_records) or nothing, then first (optional in walk_records). */
typedef struct {
    Py_buffer view;
    Py_ssize_t pos, end, count, first;
    int consecutive;
} walk_args;

static int
parse_args(PyObject *const *args, walk_args *a, PyObject *first)
{
    if (as_ssize(args[1], &a->pos) || as_ssize(args[2], &a->end) || as_ssize(args[3], &a->count))
        return -1;
    a->first = 0;
    if (first != NULL && as_ssize(first, &a->first))
        return -1;
    a->consecutive = PyObject_IsTrue(args[4]);
    if (a->consecutive < 0)
        return -1;
    if (PyObject_GetBuffer(args[0], &a->view, PyBUF_SIMPLE) < 0)
        return -1;
    if (a->pos < 0 || a->end > a->view.len || a->pos > a->end || a->first < 0) {
        PyBuffer_Release(&a->view);
        PyErr_SetString(PyExc_ValueError, "pos/end outside the buffer");
        return -1;
    }
    return 0;
}

/* Walk up to count records from *pos (indices first, first + 1, ...).
 * partial: stop without a fault before a record that does not lie wholly
 * before end (its length varint or its body continue past it).
 * Returns 0, -1 with *f set (a fault), or -2 with a Python error set. */
static int
walk(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t count, Py_ssize_t first,
     int consecutive, int partial, PyObject *fields, Py_ssize_t *walked, fault_t *f)
{
    record_t r;
    *walked = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t start = *pos;
        long long index = (long long)first + i;
        if (partial) {
            Py_ssize_t q = start;
            int64_t length;
            fault_t peek;
            if (read_varint(p, &q, end, 5, &length, &peek)) {
                if (peek.fmt == PAST_END)
                    return 0;
                *f = peek;
                return -1;
            }
            if (length >= 6 && length > end - q)
                return 0;
        }
        if (read_record(p, pos, end, index, &r, f))
            return -1;
        /* Kafka: offsets inside a batch go up by one from its base offset */
        if (consecutive && r.offset_delta != index) {
            f->pos = start;
            f->fmt = "record %lld: offset delta %lld, expected %lld";
            f->a = index;
            f->b = r.offset_delta;
            f->c = index;
            return -1;
        }
        if (fields != Py_None) {
            PyObject *headers = header_fields(p, r.headers_pos, r.end, r.header_count);
            if (headers == NULL)
                return -2;
            PyObject *t = Py_BuildValue("(LLnLnLN)", (long long)r.offset_delta,
                                        (long long)r.timestamp_delta, r.key_pos,
                                        (long long)r.key_len, r.value_pos,
                                        (long long)r.value_len, headers);
            if (t == NULL)
                return -2;
            int rc = PyList_Append(fields, t);
            Py_DECREF(t);
            if (rc < 0)
                return -2;
        }
        *walked = i + 1;
    }
    return 0;
}

static PyObject *
walk_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 6 && nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "walk_records(buf, pos, end, count, consecutive, "
                                         "fields, first=0) takes 6 or 7 arguments");
        return NULL;
    }
    PyObject *fields = args[5];
    if (fields != Py_None && !PyList_Check(fields)) {
        PyErr_SetString(PyExc_TypeError, "fields must be a list or None");
        return NULL;
    }
    walk_args a;
    if (parse_args(args, &a, nargs == 7 ? args[6] : NULL))
        return NULL;
    const uint8_t *p = (const uint8_t *)a.view.buf;
    Py_ssize_t pos = a.pos, walked;
    fault_t f = {0};
    int rc;
    /* 7 bytes is the smallest record: refuse an impossible count before looping */
    if (a.count < 0 || a.count > (a.end - a.pos) / 7) {
        f.pos = a.pos;
        f.fmt = "records count %lld cannot fit in %lld bytes of records";
        f.a = a.count;
        f.b = a.end - a.pos;
        rc = -1;
    } else {
        rc = walk(p, &pos, a.end, a.count, a.first, a.consecutive, 0, fields, &walked, &f);
    }
    if (rc == 0 && pos != a.end) {
        f.pos = pos;
        f.fmt = "%lld bytes left after the last of %lld records";
        f.a = a.end - pos;
        f.b = a.first + a.count;
        rc = -1;
    }
    PyBuffer_Release(&a.view);
    if (rc == 0)
        Py_RETURN_NONE;
    return rc == -1 ? raise_fault(&f) : NULL;
}

static PyObject *
walk_prefix(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "walk_prefix(buf, pos, end, count, consecutive, first) takes 6 arguments");
        return NULL;
    }
    walk_args a;
    if (parse_args(args, &a, args[5]))
        return NULL;
    Py_ssize_t pos = a.pos, walked = 0;
    fault_t f = {0};
    int rc = a.count < 0 ? 0 : walk((const uint8_t *)a.view.buf, &pos, a.end, a.count, a.first,
                                    a.consecutive, 1, Py_None, &walked, &f);
    PyBuffer_Release(&a.view);
    if (rc == 0)
        return Py_BuildValue("(nn)", pos, walked);
    return rc == -1 ? raise_fault(&f) : NULL;
}

static PyMethodDef methods[] = {
    {"walk_records", (PyCFunction)(void (*)(void))walk_records, METH_FASTCALL,
     "walk_records(buf, pos, end, count, consecutive, fields, first=0): see walker.py"},
    {"walk_prefix", (PyCFunction)(void (*)(void))walk_prefix, METH_FASTCALL,
     "walk_prefix(buf, pos, end, count, consecutive, first): see walker.py"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "samsa.protocol.records._walker",
    "Record walker of v2 batches (see protocol/records/walker.py).", 0, methods, slots,
    NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__walker(void)
{
    return PyModuleDef_Init(&moduledef);
}
