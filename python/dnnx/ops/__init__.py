"""One module per op: a desc builder from arrays (desc_for) and the op's calls. Each call takes
the desc, the arrays (anything with __dlpack__ or the buffer protocol, never copied), optional
``out=`` arrays and ``ctx=`` (default: the current context), and returns its outputs in the
framework of its first array input."""
