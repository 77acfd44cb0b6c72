"""Names: kernel classification (``kernel_names``) and C++ name shortening (``cxx_names``).

Pure string functions at the bottom of the analyzers: may import the model and errors,
no other analyzer package.
"""
