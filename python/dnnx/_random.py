"""The process-wide default Generator of dnnx's seeded ops (fill, dropout, dnnx.init)."""

from . import _dnnx

Generator = _dnnx.Generator

default_generator = Generator()


def manual_seed(seed):
    """Restarts the default generator at `seed`, offset 0 (torch.manual_seed); returns it."""
    default_generator.manual_seed(seed)
    return default_generator


def generator_or_default(generator):
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"generator: expected a dnnx.Generator, got {type(generator).__name__}")
    return generator
