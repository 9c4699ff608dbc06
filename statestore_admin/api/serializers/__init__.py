"""The API's bodies, one DRF serializer per shape: the views render their answers with these, and the OpenAPI
document (drf-spectacular) describes them with the same ones, so a shape is written once and the fuzz run
checks every answer against it. A serializer's class name is its component's name in the document."""
