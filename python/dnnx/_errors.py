"""dnnx's exceptions: one base class, one subclass per dnnx::ErrorKind.

Each subclass also derives from the built-in exception that fits its kind, so callers that know
nothing of dnnx still catch them sensibly (``except ValueError`` catches a bad argument). The C++
module raises them with the error's fields as attributes; errors raised by the Python layer have
the same attributes, empty where the layer does not know them.
"""


class Error(Exception):
    """Base class of every dnnx error.

    Attributes: ``kind`` (the dnnx::ErrorKind name, e.g. ``"InvalidArgument"``), ``message``
    (without decorations), ``op`` (e.g. ``"conv fwd"``), ``repro`` (the ``dnnx`` CLI line that
    reproduces the case), ``backend``, ``implementation`` (candidate id), ``status`` (backend
    status name) and ``where`` (file:line in dnnx that raised it).
    """

    kind = ""
    message = ""
    op = ""
    repro = ""
    backend = ""
    implementation = ""
    status = ""
    where = ""

    def __init__(self, *args):
        super().__init__(*args)
        if args and not self.message:
            self.message = str(args[0])


class InvalidArgument(Error, ValueError):
    """The caller passed something no backend could accept."""

    kind = "InvalidArgument"


class Unsupported(Error, NotImplementedError):
    """Valid, but this backend or implementation cannot do it."""

    kind = "Unsupported"


class OutOfMemory(Error, MemoryError):
    """A host or device allocation failed."""

    kind = "OutOfMemory"


class BackendFailure(Error, RuntimeError):
    """oneDNN, cuDNN or CUDA reported a failure."""

    kind = "BackendFailure"


class Internal(Error, RuntimeError):
    """A dnnx bug."""

    kind = "Internal"
