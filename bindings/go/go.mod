module libvegas.dev/vegas

go 1.19
