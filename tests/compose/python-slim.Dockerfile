# A stand-in for docker.io/library/python:3.11-slim, which cannot be pulled here (no image
# registry is reachable), built by tests/compose/images.py under that very name.
#
# Imitates: Debian bookworm with CPython 3.11, `python` and `pip` on PATH as in the official
# image, pip installing as root into the system's site-packages (the official image's
# Python is its own, so it has no "externally managed" guard either), ca-certificates,
# netbase and tzdata, LANG=C.UTF-8, `python3` as the command.
# Differs: the Python is Debian's python3 (3.11.2) in /usr/bin, not one built from source
# in /usr/local (so `python` is a link to it); pip is Debian's 23.0 (the official image's is
# newer) and installs into /usr/local/lib/python3.11/dist-packages; setuptools and wheel
# come as Debian packages; the image is larger (Debian's Python is split into more
# packages). The base is the debootstrap root file system images.py imports as
# private-search-test/bookworm:rootfs.
FROM private-search-test/bookworm:rootfs
RUN ln -s /usr/bin/python3 /usr/local/bin/python \
    && ln -s /usr/bin/pip3 /usr/local/bin/pip \
    && rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/*
ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
CMD ["python3"]
