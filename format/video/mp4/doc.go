// Package mp4 indexes the video track of an ISO-BMFF file (MP4, MOV).
package mp4
