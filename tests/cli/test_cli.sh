#!/usr/bin/env bash
echo "1..0 # SKIP not written yet"
