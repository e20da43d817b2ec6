# Install sugard as a system service (run as root):   make install
# Remove it again (keeps /var/lib/sugard and /etc/sugard/sugard.conf):   make uninstall
PREFIX      ?= /usr/local
DESTDIR     ?=
LIBEXECDIR  := $(PREFIX)/libexec
BINDIR      := $(PREFIX)/bin
UNITDIR     := $(PREFIX)/lib/systemd/system
SYSUSERSDIR := $(PREFIX)/lib/sysusers.d
TMPFILESDIR := $(PREFIX)/lib/tmpfiles.d
DOCDIR      := $(PREFIX)/share/doc/sugard
MANDIR      := $(PREFIX)/share/man
BASHCOMPDIR := $(PREFIX)/share/bash-completion/completions
# udev and dbus-daemon do not look under /usr/local.
UDEVDIR     := /etc/udev/rules.d
DBUSDIR     := /usr/share/dbus-1/system.d
CONFDIR     := /etc/sugard

.PHONY: all build test install uninstall deb

# The Debian package (sugard_<version>_<arch>.deb): see scripts/package.
deb:
	bash scripts/package

all: build

build:
	swift build -c release --product sugard
	swift build -c release --product sugarctl
	swift build -c release --product sugard-forward

test:
	bash scripts/test

install: build
	install -D -m 0755 .build/release/sugard $(DESTDIR)$(LIBEXECDIR)/sugard
	install -D -m 0755 .build/release/sugarctl $(DESTDIR)$(BINDIR)/sugarctl
	sed 's#/usr/local/libexec/sugard#$(LIBEXECDIR)/sugard#' systemd/sugard.service > sugard.service.tmp
	install -D -m 0644 sugard.service.tmp $(DESTDIR)$(UNITDIR)/sugard.service
	rm -f sugard.service.tmp
	install -D -m 0755 .build/release/sugard-forward $(DESTDIR)$(LIBEXECDIR)/sugard-forward
	sed 's#^ExecStart=.*#ExecStart=$(LIBEXECDIR)/sugard-forward#' systemd/sugard-forward.service > sugard-forward.service.tmp
	install -D -m 0644 sugard-forward.service.tmp $(DESTDIR)$(UNITDIR)/sugard-forward.service
	rm -f sugard-forward.service.tmp
	install -D -m 0644 systemd/sugard-forward.sysusers $(DESTDIR)$(SYSUSERSDIR)/sugard-forward.conf
	install -D -m 0644 config/forward.conf.example $(DESTDIR)$(CONFDIR)/forward.conf.example
	install -D -m 0644 systemd/sugard.sysusers $(DESTDIR)$(SYSUSERSDIR)/sugard.conf
	install -D -m 0644 systemd/sugard.tmpfiles $(DESTDIR)$(TMPFILESDIR)/sugard.conf
	install -D -m 0644 systemd/io.sugard.conf $(DESTDIR)$(DBUSDIR)/io.sugard.conf
	install -D -m 0644 udev/70-sugard.rules $(DESTDIR)$(UDEVDIR)/70-sugard.rules
	install -D -m 0644 config/sugard.conf.example $(DESTDIR)$(CONFDIR)/sugard.conf.example
	install -D -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	for doc in docs/*.md docs/*.png docs/module-map.txt; do install -D -m 0644 "$$doc" "$(DESTDIR)$(DOCDIR)/$$doc"; done
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(BASHCOMPDIR)
	.build/release/sugard --generate-man sugard > $(DESTDIR)$(MANDIR)/man8/sugard.8
	.build/release/sugard --generate-man sugard.conf > $(DESTDIR)$(MANDIR)/man5/sugard.conf.5
	.build/release/sugarctl --generate-man > $(DESTDIR)$(MANDIR)/man1/sugarctl.1
	.build/release/sugarctl --generate-completions bash > $(DESTDIR)$(BASHCOMPDIR)/sugarctl
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
		systemd-sysusers sugard.conf 2>/dev/null || systemd-sysusers; \
		systemd-sysusers sugard-forward.conf 2>/dev/null || systemd-sysusers; \
		[ -e $(CONFDIR)/forward.conf ] || install -m 0640 -o root -g sugard-forward config/forward.conf.example $(CONFDIR)/forward.conf; \
		systemd-tmpfiles --create sugard.conf 2>/dev/null || true; \
		systemctl daemon-reload; \
		udevadm control --reload 2>/dev/null || true; \
		echo "installed; start with: systemctl enable --now sugard"; \
	else \
		echo "installed into $(DESTDIR)$(PREFIX) (no running systemd: run systemd-sysusers and systemctl daemon-reload yourself)"; \
	fi

uninstall:
	-@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl disable --now sugard 2>/dev/null; fi
	-@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl disable --now sugard-forward 2>/dev/null; fi
	rm -f $(DESTDIR)$(LIBEXECDIR)/sugard-forward $(DESTDIR)$(UNITDIR)/sugard-forward.service
	rm -f $(DESTDIR)$(SYSUSERSDIR)/sugard-forward.conf $(DESTDIR)$(CONFDIR)/forward.conf.example
	rm -f $(DESTDIR)$(LIBEXECDIR)/sugard $(DESTDIR)$(BINDIR)/sugarctl
	rm -f $(DESTDIR)$(UNITDIR)/sugard.service $(DESTDIR)$(SYSUSERSDIR)/sugard.conf $(DESTDIR)$(TMPFILESDIR)/sugard.conf
	rm -f $(DESTDIR)$(DBUSDIR)/io.sugard.conf $(DESTDIR)$(UDEVDIR)/70-sugard.rules $(DESTDIR)$(CONFDIR)/sugard.conf.example
	rm -rf $(DESTDIR)$(DOCDIR)
	rm -f $(DESTDIR)$(MANDIR)/man8/sugard.8 $(DESTDIR)$(MANDIR)/man5/sugard.conf.5 $(DESTDIR)$(MANDIR)/man1/sugarctl.1
	rm -f $(DESTDIR)$(BASHCOMPDIR)/sugarctl
	-@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
	@echo "removed; kept $(CONFDIR)/sugard.conf (if any) and /var/lib/sugard (your readings)"
