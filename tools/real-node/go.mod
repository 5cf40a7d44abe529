module sandcastle.dev/tools/real-node

go 1.26.0
