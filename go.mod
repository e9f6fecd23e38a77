module github.com/magnetar-io/magnetar

go 1.26.8

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0 // indirect
	github.com/go-zookeeper/zk v1.0.4 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
