module scion.dev/tools/lincheck

go 1.18

require github.com/anishathalye/porcupine v1.3.1
