"""Readers of the file formats catalog datasets ship in, one module a format (idx, MATLAB, fixed-size binary
records, ...), each reading a file or archive member in place, a bounded piece at a time where the format
allows. Readers that need an optional package import it when called and name the extra that installs it."""
