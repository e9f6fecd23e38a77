// This empty module keeps Go tooling (go test ./..., go vet ./...) out of node_modules.
module magnetar-console-web-ignore
