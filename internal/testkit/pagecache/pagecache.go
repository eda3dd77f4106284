// Package pagecache owns Drop, which takes one file out of the kernel's
// page cache, so that a test or benchmark reads it as after a reboot
// without dropping the whole machine's caches. Test support only.
package pagecache
