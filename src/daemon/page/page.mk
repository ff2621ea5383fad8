# The status page (GET /, /status.css, /status.js, /status.svg): the files of src/daemon/page/
# compiled into the daemon, so that it serves them with no other file
# installed and no network. Included from Makefile.am after data.mk,
# which defines CLEANFILES.

vd_page_files = $(srcdir)/src/daemon/page/index.html $(srcdir)/src/daemon/page/status.css \
	$(srcdir)/src/daemon/page/status.js $(srcdir)/src/daemon/page/status.svg

libvdd_la_SOURCES += src/daemon/vd_page.c src/daemon/vd_page.h
nodist_libvdd_la_SOURCES = src/daemon/vd_page_assets.c

src/daemon/vd_page_assets.c: $(vd_page_files) $(srcdir)/src/daemon/page/embed.sh
	$(AM_V_GEN)$(MKDIR_P) src/daemon && \
	$(SHELL) $(srcdir)/src/daemon/page/embed.sh $(vd_page_files) > $@.tmp && mv $@.tmp $@

CLEANFILES += src/daemon/vd_page_assets.c src/daemon/vd_page_assets.c.tmp
# The browser test's screenshots, kept beside its log until make clean.
CLEANFILES += tests/integration/it_page-screenshot.png \
	tests/integration/it_page-screenshot-details.png
EXTRA_DIST += $(vd_page_files) src/daemon/page/embed.sh src/daemon/page/page.mk
