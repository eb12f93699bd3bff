#!/bin/sh
# The fixture image's root filesystem (the image is FROM scratch: no registry): busybox-static
# applets, the host's bash (Harbor runs every command through bash) and tmux (Harbor's
# terminus-2 drives a tmux session in the container), their shared libraries, terminfo and the
# C.UTF-8 locale tmux insists on. Usage: make_rootfs.sh DIR  (writes DIR/rootfs.tar)
set -e
cd "$1"
R=rootfs
rm -rf $R && mkdir -p $R/bin $R/tmp $R/app $R/logs $R/etc $R/root $R/usr/share $R/usr/lib/locale
cp /bin/busybox $R/bin/busybox
for a in $(/bin/busybox --list); do [ -e $R/bin/$a ] || ln -s busybox $R/bin/$a; done
for exe in /bin/bash /usr/bin/tmux; do
  cp "$exe" $R/bin/
  for lib in $(ldd "$exe" | grep -o '/[^ ]*'); do mkdir -p $R$(dirname $lib); cp -L $lib $R$lib; done
done
cp -r /usr/share/terminfo $R/usr/share/ 2>/dev/null || true
[ -d /lib/terminfo ] && mkdir -p $R/lib && cp -r /lib/terminfo $R/lib/
cp -r /usr/lib/locale/C.utf8 $R/usr/lib/locale/
ln -s ../bin $R/usr/bin && ln -s ../bin $R/sbin
echo 'root:x:0:0:root:/root:/bin/sh' > $R/etc/passwd
echo 'root:x:0:' > $R/etc/group
chmod 1777 $R/tmp
tar -C $R -cf rootfs.tar .
cat > Dockerfile <<'DOCKERFILE'
FROM scratch
ADD rootfs.tar /
ENV PATH=/bin LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=xterm
CMD ["sh"]
DOCKERFILE
