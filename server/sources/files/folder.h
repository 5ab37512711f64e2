// The `folder` source: an ImageFolder tree of encoded files, read through
// the caller's confinement (server/sources/source.h). Its scan is bounded
// (entries, time, cancellation); symlinks are followed as the caller's own
// opens follow them, wherever they lead.
#ifndef STOKER_SERVER_SOURCES_FILES_FOLDER_H_
#define STOKER_SERVER_SOURCES_FILES_FOLDER_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"

namespace stoker {

// torchvision ImageFolder layout: sorted sub-folders of `root` are classes
// 0..C-1; inside each (recursively; sorted by folder, then by name, as
// ImageFolder sorts them), files ending in .jpg/.jpeg/.png in any case are
// samples, anything else is counted in skipped_files.
// Symlinks are followed; one that leads back to a folder being scanned is
// FAILED_PRECONDITION naming both. NOT_FOUND (naming the path) if `root` is
// missing, FAILED_PRECONDITION if it is not a folder or holds no samples,
// PERMISSION_DENIED naming a folder the daemon may not read,
// RESOURCE_EXHAUSTED / DEADLINE_EXCEEDED / CANCELLED past `limits`.
absl::StatusOr<Dataset> LoadFolderDataset(const std::string& root,
                                          const ScanLimits& limits = {});

// True for names ending in .jpg / .jpeg / .png, any case (the content, not
// the name, picks the decoder).
bool HasImageExtension(const std::string& name);

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_FILES_FOLDER_H_
