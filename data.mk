# Man pages, the sample configuration and the systemd unit.
# Included from Makefile.am after tests/Makefile.inc, which defines
# EXTRA_DIST.

dist_man1_MANS = man/lensemble-verify.1
dist_man5_MANS = man/lensemble-verifyd.conf.5
dist_man8_MANS = man/lensemble-verifyd.8

# --- systemd unit -------------------------------------------------------------
# Under $(prefix) so that "make distcheck" and unprivileged installs work;
# configure does not ask pkg-config for systemd's own directory. Packagers
# override it on the command line, e.g.
#   make install systemdsystemunitdir=/usr/lib/systemd/system
systemdsystemunitdir = $(prefix)/lib/systemd/system
nodist_systemdsystemunit_DATA = systemd/lensemble-verifyd.service

# Substituted at make time, not by configure, so that the unit carries the
# fully expanded paths ($(sbindir) is "${exec_prefix}/sbin" in configure
# output). The "[@]" keeps config.status from substituting the patterns
# themselves when it writes the Makefile.
vd_edit_unit = sed \
	-e 's|@sbindir[@]|$(sbindir)|g' \
	-e 's|@sysconfdir[@]|$(sysconfdir)|g'

# Depends on Makefile so that reconfiguring with another prefix regenerates it.
systemd/lensemble-verifyd.service: $(srcdir)/systemd/lensemble-verifyd.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && \
	rm -f $@ $@.tmp && \
	$(vd_edit_unit) $(srcdir)/systemd/lensemble-verifyd.service.in >$@.tmp && \
	if grep '@[a-z_]*@' $@.tmp >/dev/null; then \
	  echo "$@: unsubstituted placeholder left" >&2; rm -f $@.tmp; exit 1; \
	fi && \
	mv $@.tmp $@

# --- sysusers.d ---------------------------------------------------------------
# The account the unit's User= names. Under $(prefix) like the unit;
# packagers override it, e.g. sysusersdir=/usr/lib/sysusers.d. The file is
# installed as lensemble-verifyd.conf (systemd-sysusers reads only *.conf),
# which a _DATA primary cannot rename, hence the rules below. Nothing here
# creates the account: run "systemd-sysusers FILE" once after installing
# (a Debian package's postinst does it; see docs/PACKAGING.md). The path
# is needed outside /usr/lib, /etc and /run, the only directories
# systemd-sysusers searches by itself.
sysusersdir = $(prefix)/lib/sysusers.d
vd_sysusers = lensemble-verifyd

# --- configuration file -------------------------------------------------------
# Installed only when absent: an upgrade must never replace an operator's
# configuration. Uninstall removes it only while it is byte-identical to
# the shipped one, so an edited file survives and "make distcheck" still
# finds an empty tree after uninstalling.
vd_conf = lensemble-verifyd.conf

install-data-local:
	$(MKDIR_P) '$(DESTDIR)$(sysusersdir)'
	$(INSTALL_DATA) $(srcdir)/systemd/$(vd_sysusers).sysusers '$(DESTDIR)$(sysusersdir)/$(vd_sysusers).conf'
	@test -n '$(DESTDIR)' || \
	  echo "create the account once with: systemd-sysusers $(sysusersdir)/$(vd_sysusers).conf"
	$(MKDIR_P) '$(DESTDIR)$(sysconfdir)'
	@if test -f '$(DESTDIR)$(sysconfdir)/$(vd_conf)'; then \
	  echo "keeping the existing $(DESTDIR)$(sysconfdir)/$(vd_conf)"; \
	else \
	  echo " $(INSTALL_DATA) $(srcdir)/etc/$(vd_conf) '$(DESTDIR)$(sysconfdir)/$(vd_conf)'"; \
	  $(INSTALL_DATA) $(srcdir)/etc/$(vd_conf) '$(DESTDIR)$(sysconfdir)/$(vd_conf)'; \
	fi

uninstall-local:
	rm -f '$(DESTDIR)$(sysusersdir)/$(vd_sysusers).conf'
	@f='$(DESTDIR)$(sysconfdir)/$(vd_conf)'; \
	if test -f "$$f" && cmp -s $(srcdir)/etc/$(vd_conf) "$$f"; then \
	  echo " rm -f '$$f'"; rm -f "$$f"; \
	elif test -f "$$f"; then \
	  echo "keeping the changed $$f"; \
	fi

# --- checks -------------------------------------------------------------------
# The shipped configuration must pass the daemon's own check and list every
# key of the table in src/daemon/vd_config.c, so that adding a key without
# documenting it fails "make check". The check looks at the state directory
# as the daemon's account would: a scratch one stands in for the installed
# one, and as root the daemon's account is nobody (--user is ignored
# otherwise).
check-local: lensemble-verifyd$(EXEEXT)
	@state=`mktemp -d` || exit 1; \
	if test "`id -u`" = 0; then chown nobody "$$state"; fi; \
	./lensemble-verifyd$(EXEEXT) -t -c $(srcdir)/etc/$(vd_conf) --state-dir "$$state" \
	  --user nobody >/dev/null; rc=$$?; rm -rf "$$state"; test $$rc = 0 || exit 1; \
	missing=; \
	for k in `sed -n 's/^[	 ]*{ "\([a-z_]*\)", K_.*/\1/p' $(srcdir)/src/daemon/vd_config.c`; do \
	  grep "^#$$k = " $(srcdir)/etc/$(vd_conf) >/dev/null || missing="$$missing $$k"; \
	  grep "^\.BI \"$$k = " $(srcdir)/man/lensemble-verifyd.conf.5 >/dev/null || missing="$$missing $$k(man)"; \
	done; \
	if test -n "$$missing"; then \
	  echo "etc/$(vd_conf) or man/lensemble-verifyd.conf.5 lacks:$$missing" >&2; exit 1; \
	fi; \
	echo "PASS: etc/$(vd_conf) and lensemble-verifyd.conf(5) cover every key"

# Nothing included before this file defines CLEANFILES, and Automake
# refuses "+=" on an undefined variable: this is its first definition, and
# anything included after this file appends with "+=".
CLEANFILES = systemd/lensemble-verifyd.service systemd/lensemble-verifyd.service.tmp
EXTRA_DIST += etc/$(vd_conf) systemd/lensemble-verifyd.service.in \
	systemd/$(vd_sysusers).sysusers docs/SECURITY-systemd.md docs/HACKING.md \
	docs/COORDINATOR.md docs/OMS.md docs/PACKAGING.md docs/PERFORMANCE.md \
	docs/SECURITY.md man/lensemble-check.1 man/lensemble-wait-for-head.1
