// The program that owns the tests' precompiled header (Note [the tests' precompiled header] in
// tests/CMakeLists.txt); it is built, never run.
int main() { return 0; }
