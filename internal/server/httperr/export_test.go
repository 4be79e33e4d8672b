package httperr

// Reasons are the names of errors Reason counts under, for the test that
// every sentinel's name is among them.
var Reasons = reasons
