module libvegas.dev/samples

go 1.19

require libvegas.dev/vegas v0.0.0

replace libvegas.dev/vegas => ../../bindings/go
