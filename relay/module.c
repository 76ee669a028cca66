/* The relay's Python binding: the module _pyngress_relay, which services/proxy/relay.py loads from the file the
 * Makefile builds. Besides the relay (relay.c) it accepts and reads each connection's first bytes, and reads the
 * ClientHello's server name in them (hello.c), for the proxy. The stable ABI (3.11 and later), so that the file built
 * against the venv's interpreter also loads in the image's Debian python3.
 *
 * Calls are METH_FASTCALL (ctypes, tried first, spent about 3,000 instructions per call on argument conversion and
 * the GIL). `poll` gives the GIL up while it waits and relays, as select.epoll.poll does while it waits. `accept_read` is
 * here for the same reason as the rest: the socket module's accept formats the peer's address (inet_ntop), needs
 * another call to make the socket non-blocking, and a socket object and a recv call (which gives the GIL up and takes it
 * again) to read the first bytes. */
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hello.h"
#include "relay.h"

#define MAX_EVENTS 512
/* What hello() returns for these verdicts: not a byte count (those are > 0). */
#define HELLO_NO_SNI_VALUE (-1)
#define HELLO_NOT_TLS_VALUE (-2)

static const char CAPSULE[] = "pyngress.relay";

static void capsule_free(PyObject *capsule) {
    relay_free(PyCapsule_GetPointer(capsule, CAPSULE));
}

static struct relay *relay_of(PyObject *capsule) {
    return PyCapsule_GetPointer(capsule, CAPSULE);
}

/* new(epoll_fd): a relay on the proxy's epoll set */
static PyObject *py_new(PyObject *self, PyObject *fd_obj) {
    (void)self;
    int epfd = PyLong_AsLong(fd_obj);
    if (epfd == -1 && PyErr_Occurred())
        return NULL;
    struct relay *r = relay_new(epfd);
    if (r == NULL)
        return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(r, CAPSULE, capsule_free);
    if (capsule == NULL)
        relay_free(r);
    return capsule;
}

/* add(relay, client_fd, client_on_set, upstream_fd, upstream_on_set, upstream_missed, first_bytes) */
static PyObject *py_add(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "add(relay, client_fd, client_on_set, upstream_fd, upstream_on_set, "
                                         "upstream_missed, first_bytes)");
        return NULL;
    }
    struct relay *r = relay_of(args[0]);
    if (r == NULL)
        return NULL;
    int client = PyLong_AsLong(args[1]), client_on_set = PyObject_IsTrue(args[2]);
    int upstream = PyLong_AsLong(args[3]), upstream_on_set = PyObject_IsTrue(args[4]);
    unsigned long missed = PyLong_AsUnsignedLong(args[5]);
    char *first;
    Py_ssize_t len;
    if (PyErr_Occurred() || client_on_set < 0 || upstream_on_set < 0 ||
        PyBytes_AsStringAndSize(args[6], &first, &len) < 0)
        return NULL;
    if (relay_add(r, client, client_on_set, upstream, upstream_on_set, (uint32_t)missed,
                  (const unsigned char *)first, (size_t)len) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

/* poll(relay, timeout_seconds[, max_events]) -> [(fd, events), ...] for the proxy's own descriptors, as
 * select.epoll.poll */
static PyObject *py_poll(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "poll(relay, timeout_seconds[, max_events])");
        return NULL;
    }
    struct relay *r = relay_of(args[0]);
    double timeout = r ? PyFloat_AsDouble(args[1]) : 0;
    long max = nargs == 3 ? PyLong_AsLong(args[2]) : MAX_EVENTS;
    if (r == NULL || PyErr_Occurred())
        return NULL;
    if (max <= 0 || max > MAX_EVENTS)
        max = MAX_EVENTS;
    struct epoll_event events[MAX_EVENTS], theirs[MAX_EVENTS];
    int n;
    Py_BEGIN_ALLOW_THREADS
    n = relay_poll(r, timeout, events, (int)max, theirs);
    Py_END_ALLOW_THREADS
    if (n < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *item = Py_BuildValue("(iI)", theirs[i].data.fd, theirs[i].events);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, i, item);
    }
    return list;
}

/* sweep(relay, max_quiet_sweeps) */
static PyObject *py_sweep(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "sweep(relay, max_quiet_sweeps)");
        return NULL;
    }
    struct relay *r = relay_of(args[0]);
    unsigned long max_quiet = r ? PyLong_AsUnsignedLong(args[1]) : 0;
    if (r == NULL || PyErr_Occurred())
        return NULL;
    return PyLong_FromSize_t(relay_sweep(r, (unsigned)max_quiet));
}

static PyObject *py_close_all(PyObject *self, PyObject *capsule) {
    (void)self;
    struct relay *r = relay_of(capsule);
    return r ? PyLong_FromSize_t(relay_close_all(r)) : NULL;
}

/* (active, opened, idle_closed, failed, bytes_to_upstream, bytes_to_client) */
static PyObject *py_counters(PyObject *self, PyObject *capsule) {
    (void)self;
    struct relay *r = relay_of(capsule);
    if (r == NULL)
        return NULL;
    const struct relay_counters *c = relay_counters(r);
    return Py_BuildValue("(KKKKKK)", (unsigned long long)c->active, (unsigned long long)c->opened,
                         (unsigned long long)c->idle_closed, (unsigned long long)c->failed,
                         (unsigned long long)c->bytes_to_upstream, (unsigned long long)c->bytes_to_client);
}

static PyObject *py_active(PyObject *self, PyObject *capsule) {
    (void)self;
    struct relay *r = relay_of(capsule);
    return r ? PyLong_FromUnsignedLongLong(relay_counters(r)->active) : NULL;
}

/* accept_read(relay, listener_fd) -> None when no connection is waiting, else (fd, first_bytes): a non-blocking,
 * close-on-exec descriptor, and what it has sent already (b"" for an EOF or an error, None when nothing has arrived) */
static PyObject *py_accept_read(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "accept_read(relay, listener_fd)");
        return NULL;
    }
    struct relay *r = relay_of(args[0]);
    int listener = r ? PyLong_AsLong(args[1]) : 0;
    if (r == NULL || (listener == -1 && PyErr_Occurred()))
        return NULL;
    const unsigned char *data;
    ssize_t len;
    int fd = relay_accept_read(r, listener, &data, &len);
    if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            Py_RETURN_NONE;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *first;
    if (len < 0) {
        first = Py_None;
        Py_INCREF(first);
    } else {
        first = PyBytes_FromStringAndSize((const char *)data, len);
    }
    PyObject *fd_obj = first ? PyLong_FromLong(fd) : NULL;
    PyObject *result = fd_obj ? PyTuple_New(2) : NULL;
    if (result == NULL) {
        Py_XDECREF(first);
        Py_XDECREF(fd_obj);
        close(fd);
        return NULL;
    }
    PyTuple_SetItem(result, 0, fd_obj);
    PyTuple_SetItem(result, 1, first);
    return result;
}

static PyObject *client_hello_error;

/* hello(first_bytes) -> the SNI host name (str), NO_SNI, NOT_TLS, or the number of bytes needed in all before anything
 * can be decided (> 0); raises ClientHelloError (a ValueError) with the reason for a malformed hello (hello.c) */
static PyObject *py_hello(PyObject *self, PyObject *data) {
    (void)self;
    struct hello h;
    enum hello_verdict verdict;
    if (PyBytes_Check(data)) {
        char *bytes;
        Py_ssize_t len;
        if (PyBytes_AsStringAndSize(data, &bytes, &len) < 0)
            return NULL;
        verdict = hello_read((const unsigned char *)bytes, (size_t)len, &h);
    } else {
        Py_buffer view;
        if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
            return NULL;
        verdict = hello_read(view.buf, (size_t)view.len, &h);
        PyBuffer_Release(&view);
    }
    switch (verdict) {
    case HELLO_SNI:
        return PyUnicode_FromStringAndSize(h.name, (Py_ssize_t)h.name_len);
    case HELLO_NO_SNI:
        return PyLong_FromLong(HELLO_NO_SNI_VALUE);
    case HELLO_NOT_TLS:
        return PyLong_FromLong(HELLO_NOT_TLS_VALUE);
    case HELLO_INCOMPLETE:
        return PyLong_FromSize_t(h.needed);
    default:
        PyErr_SetString(client_hello_error, h.reason);
        return NULL;
    }
}

static PyMethodDef methods[] = {
    {"new", py_new, METH_O, "A relay on the proxy's epoll set (its descriptor)."},
    {"add", (PyCFunction)(void (*)(void))py_add, METH_FASTCALL,
     "Take two connected non-blocking sockets and relay between them, sending first_bytes upstream first."},
    {"poll", (PyCFunction)(void (*)(void))py_poll, METH_FASTCALL,
     "Wait on the set and handle the relay's events; the others as select.epoll.poll returns them."},
    {"sweep", (PyCFunction)(void (*)(void))py_sweep, METH_FASTCALL,
     "Close the pairs idle for more than max_quiet_sweeps sweeps; returns how many."},
    {"close_all", py_close_all, METH_O, "Close every pair; returns how many."},
    {"counters", py_counters, METH_O, "(active, opened, idle_closed, failed, bytes_to_upstream, bytes_to_client)"},
    {"active", py_active, METH_O, "Pairs open now."},
    {"accept_read", (PyCFunction)(void (*)(void))py_accept_read, METH_FASTCALL,
     "accept4 without the peer's address, and a first read: None, or (fd, what it sent already)."},
    {"hello", py_hello, METH_O,
     "The verdict on a connection's first bytes: its SNI host name, NO_SNI, NOT_TLS, or the bytes needed in all."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pyngress_relay", "The passthrough proxy's relay (relay/relay.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__pyngress_relay(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (client_hello_error == NULL)
        client_hello_error = PyErr_NewExceptionWithDoc(
            "_pyngress_relay.ClientHelloError",
            "The client sent something that claims to be a TLS ClientHello but is malformed or too large.",
            PyExc_ValueError, NULL);
    if (client_hello_error == NULL || PyModule_AddObjectRef(m, "ClientHelloError", client_hello_error) < 0 ||
        PyModule_AddIntConstant(m, "NO_SNI", HELLO_NO_SNI_VALUE) < 0 ||
        PyModule_AddIntConstant(m, "NOT_TLS", HELLO_NOT_TLS_VALUE) < 0 ||
        PyModule_AddIntConstant(m, "MAX_HELLO_LENGTH", HELLO_MAX_LENGTH) < 0 ||
        PyModule_AddIntConstant(m, "MAX_BUFFERED", HELLO_MAX_BUFFERED) < 0 ||
        PyModule_AddIntConstant(m, "READ_SIZE", (long)relay_read_size()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
